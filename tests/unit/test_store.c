/* Unit tests for the artifact store (src/store/store.c) and the stat cache
 * (src/store/statcache.c): publish, dedupe, directory manifests, hashing
 * without storing, checkout, verify, gc and error cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "millrace/store.h"

#define assert_contains(hay, needle)                                                         \
    do {                                                                                     \
        if (!strstr((hay), (needle))) fail_msg("'%s' does not contain '%s'", (hay), (needle)); \
    } while (0)

/* ---- fixture: a temp dir with a store at <dir>/.millrace and files under <dir>/ws */

typedef struct fx {
    char *dir;
    char *ws;
    mr_store *st;
    mr_statcache *sc;
    mr_error err;
} fx;

static int setup(void **state)
{
    fx *f = mr_calloc(1, sizeof(*f));
    assert_alloc(f);
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/mr_store_ut.XXXXXX", mr_test_tmpdir());
    if (!mkdtemp(tmpl)) return -1;
    f->dir = mr_strdup(tmpl);
    assert_alloc(f->dir);
    f->ws = mr_path_join(f->dir, "ws");
    assert_alloc(f->ws);
    char *root = mr_path_join(f->dir, ".millrace");
    assert_alloc(root);
    mr_error_init(&f->err);
    if (mkdir(f->ws, 0755) != 0) return -1;
    assert_ok(mr_store_open(root, &f->st, &f->err));
    assert_ok(mr_statcache_new(&f->sc, &f->err));
    mr_free(root);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    mr_error err;
    mr_error_init(&err);
    mr_store_close(f->st);
    mr_statcache_free(f->sc);
    mr_status st = mr_fs_rmtree(f->dir, &err);
    mr_free(f->dir);
    mr_free(f->ws);
    mr_free(f);
    /* under torture the runner removes what an out-of-memory rmtree left */
    return st == MR_OK || (st == MR_E_NOMEM && mr_test_fault_fired()) ? 0 : -1;
}

/* Fails the test with the error message when st is not MR_OK. */
static void check(mr_status st, mr_error *err)
{
    if (st != MR_OK) fail_msg("%s: %s", mr_status_name(st), err->msg);
}

static char *wpath(const fx *f, const char *rel)
{
    char *p = mr_path_join(f->ws, rel);
    assert_alloc(p);
    return p;
}

static void write_file(const char *path, const char *data, size_t len, mode_t mode)
{
    char *slash = strrchr(path, '/');
    char *parent = mr_strndup(path, (size_t)(slash - path));
    assert_alloc(parent);
    mr_error err;
    mr_error_init(&err);
    check(mr_fs_mkdirs(parent, &err), &err);
    mr_free(parent);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    assert_int_equal(close(fd), 0);
    assert_int_equal(chmod(path, mode), 0);
}

static void write_ws(const fx *f, const char *rel, const char *data, mode_t mode)
{
    char *p = wpath(f, rel);
    write_file(p, data, strlen(data), mode);
    mr_free(p);
}

static char *read_all(const char *path, size_t *len)
{
    char *data = NULL;
    mr_error err;
    mr_error_init(&err);
    check(mr_fs_read_file(path, 0, &data, len, &err), &err);
    return data;
}

static void assert_file(const char *path, const char *want, unsigned want_mode)
{
    size_t len = 0;
    char *got = read_all(path, &len);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(got, want, len);
    mr_free(got);
    struct stat sb;
    assert_int_equal(stat(path, &sb), 0);
    if ((sb.st_mode & 0777) != want_mode) fail_msg("%s: mode %o, want %o", path, sb.st_mode & 0777, want_mode);
}

/* Counts the object files under objects/ (any name). */
static size_t count_objects(const fx *f)
{
    char *objs = mr_asprintf("%s/.millrace/objects", f->dir);
    assert_alloc(objs);
    DIR *top = opendir(objs);
    assert_alloc(top);
    size_t n = 0;
    struct dirent *de;
    while ((de = readdir(top)) != NULL) {
        if (de->d_name[0] == '.') continue;
        char *sub = mr_path_join(objs, de->d_name);
        assert_alloc(sub);
        DIR *d = opendir(sub);
        assert_alloc(d);
        struct dirent *e2;
        while ((e2 = readdir(d)) != NULL)
            if (e2->d_name[0] != '.') n++;
        closedir(d);
        mr_free(sub);
    }
    closedir(top);
    mr_free(objs);
    return n;
}

static void id_of(const mr_artifact *a, char *id) { mr_artifact_id(a, id); }

static mr_artifact publish(fx *f, const char *rel)
{
    mr_artifact a;
    char *p = wpath(f, rel);
    check(mr_store_publish(f->st, f->sc, p, &a, &f->err), &f->err);
    mr_free(p);
    return a;
}

/* ---- artifact ids -------------------------------------------------------- */

static void test_artifact_id_round_trip(void **state)
{
    (void)state;
    mr_artifact a = {.hash = mr_hash_bytes("x", 1)}, b;
    char id[MR_ARTIFACT_ID_LEN];
    mr_artifact_id(&a, id);
    assert_int_equal(strlen(id), 32);
    assert_ok(mr_artifact_parse(id, &b));
    assert_true(mr_hash_eq(a.hash, b.hash));
    assert_int_equal(b.is_dir, 0);
    a.is_dir = 1;
    mr_artifact_id(&a, id);
    assert_int_equal(strlen(id), 36);
    assert_string_equal(id + 32, ".dir");
    assert_ok(mr_artifact_parse(id, &b));
    assert_int_equal(b.is_dir, 1);
    assert_true(mr_hash_eq(a.hash, b.hash));
    assert_status(mr_artifact_parse("", &b), MR_E_PARSE);
    assert_status(mr_artifact_parse("0123456789abcdef0123456789abcdef.txt", &b), MR_E_PARSE);
    assert_status(mr_artifact_parse("0123456789abcdef0123456789abcdeZ", &b), MR_E_PARSE);
    assert_status(mr_artifact_parse("0123456789abcdef0123456789abcde", &b), MR_E_PARSE);
}

/* ---- publish ------------------------------------------------------------- */

static void test_publish_file(void **state)
{
    fx *f = *state;
    const char *content = "id,x\n1,2\n";
    write_ws(f, "data/clean.csv", content, 0644);
    mr_artifact a = publish(f, "data/clean.csv");
    assert_int_equal(a.is_dir, 0);
    assert_int_equal(a.size, strlen(content));
    assert_int_equal(a.n_files, 1);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes(content, strlen(content))));
    assert_true(mr_store_has(f->st, &a));

    /* objects/<2 hex>/<30 hex>, read-only, same inode as the workspace file */
    char id[MR_ARTIFACT_ID_LEN];
    id_of(&a, id);
    char *want_obj = mr_asprintf("%s/.millrace/objects/%.2s/%s", f->dir, id, id + 2);
    assert_alloc(want_obj);
    char *obj = mr_store_object_path(f->st, &a);
    assert_alloc(obj);
    assert_string_equal(obj, want_obj);
    char *p = wpath(f, "data/clean.csv");
    struct stat so, sp;
    assert_int_equal(stat(obj, &so), 0);
    assert_int_equal(stat(p, &sp), 0);
    assert_int_equal(so.st_mode & 0777, 0444);
    assert_int_equal(sp.st_mode & 0777, 0444);
    assert_int_equal(so.st_ino, sp.st_ino);
    assert_int_equal(so.st_dev, sp.st_dev);
    assert_file(obj, content, 0444);
    assert_int_equal(count_objects(f), 1);

    /* the stat cache now knows the path, so re-hashing is free (an entry
     * that could not be stored for want of memory is only a miss later) */
    mr_hash128 h;
    int cached = mr_statcache_lookup(f->sc, p, (uint64_t)sp.st_size,
                                     (uint64_t)sp.st_mtim.tv_sec * 1000000000ull + (uint64_t)sp.st_mtim.tv_nsec,
                                     (uint64_t)sp.st_ino, &h);
    if (!mr_test_fault_fired()) assert_int_equal(cached, 1);
    if (cached) assert_true(mr_hash_eq(h, a.hash));
    const char *paths[] = {p};
    mr_artifact again;
    uint64_t hashed = 99;
    check(mr_store_hash_paths(f->st, f->sc, paths, 1, &again, &hashed, &f->err), &f->err);
    if (cached) assert_int_equal(hashed, 0);
    assert_true(mr_hash_eq(again.hash, a.hash));

    /* publishing the published file again changes nothing */
    mr_artifact twice = publish(f, "data/clean.csv");
    assert_true(mr_hash_eq(twice.hash, a.hash));
    assert_int_equal(count_objects(f), 1);
    mr_free(p);
    mr_free(obj);
    mr_free(want_obj);
}

static void test_publish_dedupes(void **state)
{
    fx *f = *state;
    write_ws(f, "a.txt", "same bytes\n", 0644);
    write_ws(f, "sub/b.txt", "same bytes\n", 0600);
    write_ws(f, "c.txt", "other bytes\n", 0644);
    mr_artifact a = publish(f, "a.txt");
    mr_artifact b = publish(f, "sub/b.txt");
    assert_true(mr_hash_eq(a.hash, b.hash));
    assert_int_equal(count_objects(f), 1);
    mr_artifact c = publish(f, "c.txt");
    assert_false(mr_hash_eq(a.hash, c.hash));
    assert_int_equal(count_objects(f), 2);
    /* both workspace files are links to the one object */
    char *obj = mr_store_object_path(f->st, &a);
    assert_alloc(obj);
    char *pa = wpath(f, "a.txt"), *pb = wpath(f, "sub/b.txt");
    struct stat so, sa, sb;
    assert_int_equal(stat(obj, &so), 0);
    assert_int_equal(stat(pa, &sa), 0);
    assert_int_equal(stat(pb, &sb), 0);
    assert_int_equal(sa.st_ino, so.st_ino);
    assert_int_equal(sb.st_ino, so.st_ino);
    assert_int_equal(so.st_nlink, 3);
    assert_int_equal(sb.st_mode & 0777, 0444);
    /* no temporary files left behind */
    char *tmp = mr_asprintf("%s/.millrace/tmp", f->dir);
    assert_alloc(tmp);
    DIR *d = opendir(tmp);
    assert_alloc(d);
    struct dirent *de;
    while ((de = readdir(d)) != NULL)
        if (de->d_name[0] != '.') fail_msg("stray file in tmp/: %s", de->d_name);
    closedir(d);
    char *lnk = mr_asprintf("%s/sub", f->ws);
    assert_alloc(lnk);
    d = opendir(lnk);
    assert_alloc(d);
    while ((de = readdir(d)) != NULL)
        if (strstr(de->d_name, ".mrlink.")) fail_msg("stray link in workspace: %s", de->d_name);
    closedir(d);
    mr_free(lnk);
    mr_free(tmp);
    mr_free(obj);
    mr_free(pa);
    mr_free(pb);
}

/* The tree used by the directory tests. */
static void make_tree(const fx *f, const char *top)
{
    char rel[256];
    snprintf(rel, sizeof(rel), "%s/x/y/z.txt", top);
    write_ws(f, rel, "deep\n", 0644);
    snprintf(rel, sizeof(rel), "%s/run.sh", top);
    write_ws(f, rel, "#!/bin/sh\necho hi\n", 0755);
    snprintf(rel, sizeof(rel), "%s/empty", top);
    write_ws(f, rel, "", 0644);
    snprintf(rel, sizeof(rel), "%s/x.b", top); /* sorts before "x/..." bytewise */
    write_ws(f, rel, "dot\n", 0644);
    snprintf(rel, sizeof(rel), "%s/x/y/zz.txt", top);
    write_ws(f, rel, "deep\n", 0644); /* same content as z.txt */
}

static char *expected_manifest(void)
{
    char h_deep[33], h_sh[33], h_empty[33], h_dot[33];
    mr_hash_hex(mr_hash_bytes("deep\n", 5), h_deep);
    mr_hash_hex(mr_hash_bytes("#!/bin/sh\necho hi\n", 18), h_sh);
    mr_hash_hex(mr_hash_bytes("", 0), h_empty);
    mr_hash_hex(mr_hash_bytes("dot\n", 4), h_dot);
    /* sorted bytewise by path (docs/formats.md) */
    return mr_asprintf("%s 644 0 empty\n"
                       "%s 755 18 run.sh\n"
                       "%s 644 4 x.b\n"
                       "%s 644 5 x/y/z.txt\n"
                       "%s 644 5 x/y/zz.txt\n",
                       h_empty, h_sh, h_dot, h_deep, h_deep);
}

static void test_publish_dir(void **state)
{
    fx *f = *state;
    make_tree(f, "model");
    char *want = expected_manifest();
    assert_alloc(want);
    mr_artifact a = publish(f, "model");
    assert_int_equal(a.is_dir, 1);
    assert_int_equal(a.n_files, 5);
    assert_int_equal(a.size, 0 + 18 + 4 + 5 + 5);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes(want, strlen(want))));
    char id[MR_ARTIFACT_ID_LEN];
    id_of(&a, id);
    assert_string_equal(id + 32, ".dir");

    /* the manifest object holds exactly that text, read-only */
    char *obj = mr_store_object_path(f->st, &a);
    assert_alloc(obj);
    assert_contains(obj, ".dir");
    assert_file(obj, want, 0444);
    /* blobs: deep, sh, empty, dot (+ manifest) */
    assert_int_equal(count_objects(f), 5);

    /* children listed by the manifest */
    mr_artifact *ch = NULL;
    size_t n = 0;
    check(mr_store_dir_children(f->st, &a, &ch, &n, &f->err), &f->err);
    assert_int_equal(n, 5);
    assert_true(mr_hash_eq(ch[0].hash, mr_hash_bytes("", 0)));
    assert_int_equal(ch[1].size, 18);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(ch[i].is_dir, 0);
        assert_true(mr_store_has(f->st, &ch[i]));
    }
    mr_free(ch);

    /* workspace files: read-only; plain files are links to their objects;
     * the executable keeps its x bits (so it is its own copy) */
    char *z = wpath(f, "model/x/y/z.txt"), *sh = wpath(f, "model/run.sh");
    mr_artifact deep = {.hash = mr_hash_bytes("deep\n", 5)};
    char *deep_obj = mr_store_object_path(f->st, &deep);
    assert_alloc(deep_obj);
    struct stat sz, sd, ss;
    assert_int_equal(stat(z, &sz), 0);
    assert_int_equal(stat(deep_obj, &sd), 0);
    assert_int_equal(sz.st_ino, sd.st_ino);
    assert_int_equal(sz.st_mode & 0777, 0444);
    assert_int_equal(stat(sh, &ss), 0);
    assert_int_equal(ss.st_mode & 0777, 0555);
    assert_file(sh, "#!/bin/sh\necho hi\n", 0555);
    mr_artifact sh_a = {.hash = mr_hash_bytes("#!/bin/sh\necho hi\n", 18)};
    char *sh_obj = mr_store_object_path(f->st, &sh_a);
    assert_alloc(sh_obj);
    assert_file(sh_obj, "#!/bin/sh\necho hi\n", 0444);

    /* re-publishing is idempotent */
    mr_artifact b = publish(f, "model");
    assert_true(mr_hash_eq(a.hash, b.hash));
    assert_int_equal(count_objects(f), 5);
    mr_free(sh_obj);
    mr_free(deep_obj);
    mr_free(z);
    mr_free(sh);
    mr_free(obj);
    mr_free(want);
}

static void test_hash_paths_matches_publish(void **state)
{
    fx *f = *state;
    make_tree(f, "tree");
    write_ws(f, "file.bin", "payload", 0644);
    char *pt = wpath(f, "tree"), *pf = wpath(f, "file.bin");
    const char *paths[] = {pt, pf};
    mr_artifact h[2];
    uint64_t hashed = 0;
    check(mr_store_hash_paths(f->st, NULL, paths, 2, h, &hashed, &f->err), &f->err);
    assert_int_equal(hashed, 0 + 18 + 4 + 5 + 5 + 7);
    assert_int_equal(count_objects(f), 0); /* nothing stored */
    assert_int_equal(h[0].is_dir, 1);
    assert_int_equal(h[0].n_files, 5);
    assert_int_equal(h[1].is_dir, 0);
    assert_int_equal(h[1].size, 7);
    /* files are untouched: still writable */
    struct stat sb;
    assert_int_equal(stat(pf, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0644);

    mr_artifact p0 = publish(f, "tree"), p1 = publish(f, "file.bin");
    char a[MR_ARTIFACT_ID_LEN], b[MR_ARTIFACT_ID_LEN];
    id_of(&h[0], a);
    id_of(&p0, b);
    assert_string_equal(a, b);
    assert_int_equal(h[0].size, p0.size);
    id_of(&h[1], a);
    id_of(&p1, b);
    assert_string_equal(a, b);

    /* a path that does not exist */
    const char *missing[] = {"/nonexistent/for/sure"};
    mr_error_clear(&f->err);
    assert_status(mr_store_hash_paths(f->st, f->sc, missing, 1, h, NULL, &f->err), MR_E_NOT_FOUND);
    assert_contains(f->err.msg, "/nonexistent/for/sure");
    mr_free(pt);
    mr_free(pf);
}

static void test_publish_missing(void **state)
{
    fx *f = *state;
    char *p = wpath(f, "no/such/file.csv");
    mr_artifact a;
    assert_status(mr_store_publish(f->st, f->sc, p, &a, &f->err), MR_E_NOT_FOUND);
    assert_status(f->err.code, MR_E_NOT_FOUND);
    assert_contains(f->err.msg, p);
    assert_int_equal(count_objects(f), 0);
    mr_free(p);
}

/* ---- checkout ------------------------------------------------------------ */

static void test_checkout_file_and_dir(void **state)
{
    fx *f = *state;
    write_ws(f, "one.txt", "just one\n", 0644);
    make_tree(f, "model");
    mr_artifact file = publish(f, "one.txt");
    mr_artifact dir = publish(f, "model");

    char *dest = mr_asprintf("%s/out/nested/copy.txt", f->dir); /* parents created */
    assert_alloc(dest);
    check(mr_store_checkout(f->st, f->sc, &file, dest, &f->err), &f->err);
    assert_file(dest, "just one\n", 0444);

    char *ddest = mr_asprintf("%s/out/model", f->dir);
    assert_alloc(ddest);
    check(mr_store_checkout(f->st, f->sc, &dir, ddest, &f->err), &f->err);
    static const struct {
        const char *rel, *content;
        unsigned mode;
    } want[] = {
        {"empty", "", 0444},
        {"run.sh", "#!/bin/sh\necho hi\n", 0555},
        {"x.b", "dot\n", 0444},
        {"x/y/z.txt", "deep\n", 0444},
        {"x/y/zz.txt", "deep\n", 0444},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        char *p = mr_path_join(ddest, want[i].rel);
        assert_alloc(p);
        assert_file(p, want[i].content, want[i].mode);
        mr_free(p);
    }
    /* the checkout hashes to the same artifact */
    const char *paths[] = {ddest, dest};
    mr_artifact h[2];
    check(mr_store_hash_paths(f->st, NULL, paths, 2, h, NULL, &f->err), &f->err);
    assert_true(mr_hash_eq(h[0].hash, dir.hash));
    assert_int_equal(h[0].is_dir, 1);
    assert_true(mr_hash_eq(h[1].hash, file.hash));
    mr_free(dest);
    mr_free(ddest);
}

static void test_checkout_missing(void **state)
{
    fx *f = *state;
    mr_artifact a = {.hash = mr_hash_bytes("never stored", 12)};
    char *dest = mr_asprintf("%s/out.txt", f->dir);
    assert_alloc(dest);
    assert_status(mr_store_checkout(f->st, f->sc, &a, dest, &f->err), MR_E_NOT_FOUND);
    char id[MR_ARTIFACT_ID_LEN];
    id_of(&a, id);
    assert_contains(f->err.msg, id);
    assert_true(f->err.hint[0] != '\0');
    assert_false(mr_fs_exists(dest));
    a.is_dir = 1;
    mr_error_clear(&f->err);
    assert_status(mr_store_checkout(f->st, f->sc, &a, dest, &f->err), MR_E_NOT_FOUND);
    assert_false(mr_fs_exists(dest));
    mr_free(dest);
}

/* ---- stat cache ---------------------------------------------------------- */

static void count_fn(void *ctx, const mr_statcache_entry *e)
{
    (void)e;
    (*(size_t *)ctx)++;
}

static void test_statcache_lookup(void **state)
{
    (void)state;
    mr_statcache *sc = NULL;
    mr_error err;
    mr_error_init(&err);
    check(mr_statcache_new(&sc, &err), &err);
    mr_hash128 h = mr_hash_bytes("a", 1), got = {0, 0};
    assert_ok(mr_statcache_put(sc, "data/a.csv", 10, 5000, 77, h, 0));
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 10, 5000, 77, &got), 1);
    assert_true(mr_hash_eq(got, h));
    /* any identity difference misses */
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 11, 5000, 77, &got), 0);
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 10, 5001, 77, &got), 0);
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 10, 5000, 78, &got), 0);
    assert_int_equal(mr_statcache_lookup(sc, "data/b.csv", 10, 5000, 77, &got), 0);
    assert_int_equal(mr_statcache_lookup(NULL, "data/a.csv", 10, 5000, 77, &got), 0);

    /* replacing an entry; dirty tracking */
    mr_hash128 h2 = mr_hash_bytes("b", 1);
    assert_ok(mr_statcache_put(sc, "data/a.csv", 10, 6000, 77, h2, 1));
    assert_int_equal(mr_statcache_count(sc), 1);
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 10, 5000, 77, &got), 0);
    assert_int_equal(mr_statcache_lookup(sc, "data/a.csv", 10, 6000, 77, &got), 1);
    assert_true(mr_hash_eq(got, h2));

    /* growth keeps every entry */
    for (int i = 0; i < 2000; i++) {
        char p[32];
        snprintf(p, sizeof(p), "f/%d", i);
        assert_ok(mr_statcache_put(sc, p, (uint64_t)i, (uint64_t)i * 3, (uint64_t)i * 7,
                                          mr_hash_bytes(p, strlen(p)), 0));
    }
    assert_int_equal(mr_statcache_count(sc), 2001);
    for (int i = 0; i < 2000; i++) {
        char p[32];
        snprintf(p, sizeof(p), "f/%d", i);
        assert_int_equal(mr_statcache_lookup(sc, p, (uint64_t)i, (uint64_t)i * 3, (uint64_t)i * 7, &got), 1);
        assert_true(mr_hash_eq(got, mr_hash_bytes(p, strlen(p))));
    }
    size_t all = 0, dirty = 0;
    mr_statcache_foreach(sc, 0, count_fn, &all);
    mr_statcache_foreach(sc, 1, count_fn, &dirty);
    assert_int_equal(all, 2001);
    assert_int_equal(dirty, 1);
    mr_statcache_free(sc);
    mr_statcache_free(NULL);
}

static void test_statcache_used_by_hash_paths(void **state)
{
    fx *f = *state;
    write_ws(f, "in.txt", "aaaa", 0644);
    char *p = wpath(f, "in.txt");
    const char *paths[] = {p};
    mr_artifact a;
    uint64_t hashed = 0;
    check(mr_store_hash_paths(f->st, f->sc, paths, 1, &a, &hashed, &f->err), &f->err);
    assert_int_equal(hashed, 4);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes("aaaa", 4)));
    check(mr_store_hash_paths(f->st, f->sc, paths, 1, &a, &hashed, &f->err), &f->err);
    assert_int_equal(hashed, 0); /* a hit: nothing read */

    /* Same size, same inode, mtime restored: the cache cannot tell and
     * returns the stale hash. This is the documented trade-off of keying on
     * (size, mtime, inode) instead of reading the bytes. */
    struct stat before, after;
    assert_int_equal(stat(p, &before), 0);
    int fd = open(p, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "bbbb", 4, 0), 4);
    assert_int_equal(close(fd), 0);
    struct timespec ts[2] = {before.st_atim, before.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
    assert_int_equal(stat(p, &after), 0);
    assert_int_equal(after.st_ino, before.st_ino);
    assert_int_equal(after.st_size, before.st_size);
    check(mr_store_hash_paths(f->st, f->sc, paths, 1, &a, &hashed, &f->err), &f->err);
    assert_int_equal(hashed, 0);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes("aaaa", 4))); /* stale */
    /* without the cache the truth comes out */
    check(mr_store_hash_paths(f->st, NULL, paths, 1, &a, &hashed, &f->err), &f->err);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes("bbbb", 4)));

    /* a changed mtime re-hashes */
    ts[1].tv_sec += 1;
    assert_int_equal(utimensat(AT_FDCWD, p, ts, 0), 0);
    check(mr_store_hash_paths(f->st, f->sc, paths, 1, &a, &hashed, &f->err), &f->err);
    assert_int_equal(hashed, 4);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes("bbbb", 4)));
    /* ... and the cache learned the new identity */
    check(mr_store_hash_paths(f->st, f->sc, paths, 1, &a, &hashed, &f->err), &f->err);
    assert_int_equal(hashed, 0);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes("bbbb", 4)));

    /* a replaced file (new inode, same size and mtime) re-hashes too */
    char *tmp = wpath(f, "in.txt.new");
    write_file(tmp, "cccc", 4, 0644);
    struct stat cur;
    assert_int_equal(stat(p, &cur), 0);
    struct timespec ts2[2] = {cur.st_atim, cur.st_mtim};
    assert_int_equal(utimensat(AT_FDCWD, tmp, ts2, 0), 0);
    assert_int_equal(rename(tmp, p), 0);
    check(mr_store_hash_paths(f->st, f->sc, paths, 1, &a, &hashed, &f->err), &f->err);
    assert_int_equal(hashed, 4);
    assert_true(mr_hash_eq(a.hash, mr_hash_bytes("cccc", 4)));
    mr_free(tmp);
    mr_free(p);
}

/* ---- verify -------------------------------------------------------------- */

typedef struct problems {
    int n;
    char ids[8][MR_ARTIFACT_ID_LEN + 8];
    char what[8][256];
} problems;

static void problem_fn(void *ctx, const char *id, const char *problem)
{
    problems *p = ctx;
    if (p->n < 8) {
        snprintf(p->ids[p->n], sizeof(p->ids[0]), "%s", id);
        snprintf(p->what[p->n], sizeof(p->what[0]), "%s", problem);
    }
    p->n++;
}

/* Out of memory at every allocation of a verify of a clean store: MR_OK with
 * the full, clean count, or MR_E_NOMEM; never a corrupt or missing object
 * nor one left out (it reported 'corrupt' on a clean store). */
static void test_verify_oom(void **state)
{
    fx *f = *state;
    write_ws(f, "a.txt", "alpha\n", 0644);
    make_tree(f, "d");
    publish(f, "a.txt");
    publish(f, "d");
    int fired = 1;
    for (long k = 1; fired; k++) {
        problems pr = {0};
        mr_verify_stats vs;
        mr_error err;
        mr_error_init(&err);
        uint64_t oom0 = mr_alloc_failures_here();
        mr_alloc_fail_after(k);
        mr_status rc = mr_store_verify(f->st, problem_fn, &pr, &vs, &err);
        mr_alloc_fail_after(0);
        fired = mr_alloc_failures_here() != oom0;
        if (rc == MR_E_NOMEM && fired) continue;
        assert_ok(rc);
        assert_int_equal(pr.n, 0);
        assert_int_equal(vs.n_objects, 6);
        assert_int_equal(vs.n_corrupt, 0);
        assert_int_equal(vs.n_missing, 0);
    }
}

static void test_verify_clean_and_corrupt(void **state)
{
    fx *f = *state;
    write_ws(f, "a.txt", "alpha\n", 0644);
    make_tree(f, "d");
    mr_artifact a = publish(f, "a.txt");
    publish(f, "d");
    problems pr = {0};
    mr_verify_stats vs;
    check(mr_store_verify(f->st, problem_fn, &pr, &vs, &f->err), &f->err);
    assert_int_equal(pr.n, 0);
    assert_int_equal(vs.n_objects, 6);
    assert_int_equal(vs.n_corrupt, 0);
    assert_int_equal(vs.n_missing, 0);

    /* flip one byte of a.txt's object */
    char *obj = mr_store_object_path(f->st, &a);
    assert_alloc(obj);
    assert_int_equal(chmod(obj, 0644), 0);
    int fd = open(obj, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "A", 1, 0), 1);
    assert_int_equal(close(fd), 0);
    memset(&pr, 0, sizeof(pr));
    check(mr_store_verify(f->st, problem_fn, &pr, &vs, &f->err), &f->err);
    assert_int_equal(pr.n, 1);
    char id[MR_ARTIFACT_ID_LEN];
    id_of(&a, id);
    assert_string_equal(pr.ids[0], id);
    assert_contains(pr.what[0], "corrupt");
    assert_int_equal(vs.n_corrupt, 1);
    assert_int_equal(vs.n_missing, 0);
    mr_free(obj);
}

static void test_verify_missing_child(void **state)
{
    fx *f = *state;
    make_tree(f, "d");
    mr_artifact d = publish(f, "d");
    mr_artifact dot = {.hash = mr_hash_bytes("dot\n", 4)};
    char *obj = mr_store_object_path(f->st, &dot);
    assert_alloc(obj);
    assert_int_equal(unlink(obj), 0);
    problems pr = {0};
    mr_verify_stats vs;
    check(mr_store_verify(f->st, problem_fn, &pr, &vs, &f->err), &f->err);
    assert_int_equal(pr.n, 1);
    char did[MR_ARTIFACT_ID_LEN], cid[MR_ARTIFACT_ID_LEN];
    id_of(&d, did);
    id_of(&dot, cid);
    assert_string_equal(pr.ids[0], did);
    assert_contains(pr.what[0], "missing");
    assert_contains(pr.what[0], cid);
    assert_int_equal(vs.n_missing, 1);
    assert_int_equal(vs.n_corrupt, 0);
    /* checkout of the damaged directory fails instead of half-succeeding silently */
    char *dest = mr_asprintf("%s/co", f->dir);
    assert_alloc(dest);
    assert_int_not_equal(mr_store_checkout(f->st, NULL, &d, dest, &f->err), MR_OK);
    mr_free(dest);
    mr_free(obj);
}

/* ---- adopting downloaded objects (a remote's pull) ------------------------- */

/* Copies object a of store `from` to a new temporary file (a download). */
static char *download(fx *f, mr_store *from, const mr_artifact *a, const char *name)
{
    char *obj = mr_store_object_path(from, a);
    char *tmp = mr_asprintf("%s/%s", f->dir, name);
    assert_alloc(obj);
    assert_alloc(tmp);
    unlink(tmp);
    check(mr_fs_copy_file(obj, tmp, &f->err), &f->err);
    mr_free(obj);
    return tmp;
}

static void test_adopt(void **state)
{
    fx *f = *state;
    make_tree(f, "d");
    mr_artifact d = publish(f, "d");
    char *root2 = mr_asprintf("%s/.other", f->dir);
    assert_alloc(root2);
    mr_store *st2 = NULL;
    check(mr_store_open(root2, &st2, &f->err), &f->err);
    mr_store_entry *es = NULL;
    size_t n = 0;
    check(mr_store_dir_entries(f->st, &d, &es, &n, &f->err), &f->err);
    assert_int_equal(n, 5);
    /* the manifest parses from its bytes as from the store */
    char *man = download(f, f->st, &d, "man.dl");
    char *text = NULL;
    size_t len = 0;
    check(mr_fs_read_file(man, 1 << 20, &text, &len, &f->err), &f->err);
    mr_store_entry *pe = NULL;
    size_t pn = 0;
    check(mr_store_manifest_parse(text, len, "man", &pe, &pn, &f->err), &f->err);
    assert_int_equal(pn, n);
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(pe[i].path, es[i].path);
        assert_memory_equal(&pe[i].file.hash, &es[i].file.hash, sizeof(mr_hash128));
        assert_int_equal(pe[i].mode, es[i].mode);
    }
    mr_store_entries_free(pe, pn);
    mr_error e;
    mr_error_init(&e);
    assert_status(mr_store_manifest_parse("zz 644 1 a\n", 11, "bad", &pe, &pn, &e), MR_E_CORRUPT);
    /* a manifest before its files: refused, nothing stored */
    mr_error_init(&e);
    assert_status(mr_store_adopt(st2, man, &d, &e), MR_E_NOT_FOUND);
    assert_contains(e.msg, "not in the store");
    assert_int_equal(mr_store_has(st2, &d), 0);
    /* a file whose bytes are not its id's: refused, named */
    char *bad = mr_asprintf("%s/bad.dl", f->dir);
    assert_alloc(bad);
    write_file(bad, "tampered\n", 9, 0644);
    mr_error_init(&e);
    assert_status(mr_store_adopt(st2, bad, &es[0].file, &e), MR_E_CORRUPT);
    assert_contains(e.msg, "hashes to");
    assert_int_equal(mr_store_has(st2, &es[0].file), 0);
    /* the files, then the manifest: the directory checks out whole from the second store */
    for (size_t i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof(name), "f%zu.dl", i);
        char *dl = download(f, f->st, &es[i].file, name);
        check(mr_store_adopt(st2, dl, &es[i].file, &f->err), &f->err);
        assert_int_equal(access(dl, F_OK), -1); /* moved in, or removed as a duplicate */
        mr_free(dl);
    }
    check(mr_store_adopt(st2, man, &d, &f->err), &f->err);
    check(mr_store_check(st2, &d, 0, &f->err), &f->err);
    char *dest = mr_asprintf("%s/co2", f->dir);
    assert_alloc(dest);
    check(mr_store_checkout(st2, NULL, &d, dest, &f->err), &f->err);
    mr_artifact again;
    const char *one[1] = {dest};
    check(mr_store_hash_paths(st2, NULL, one, 1, &again, NULL, &f->err), &f->err);
    assert_memory_equal(&again.hash, &d.hash, sizeof(mr_hash128));
    mr_free(dest);
    mr_free(bad);
    mr_free(text);
    mr_free(man);
    mr_store_entries_free(es, n);
    mr_store_close(st2);
    mr_free(root2);
}

/* ---- gc ------------------------------------------------------------------ */

static void test_gc(void **state)
{
    fx *f = *state;
    write_ws(f, "keep.txt", "keep me\n", 0644);
    write_ws(f, "drop.txt", "drop me, 16 byte", 0644);
    make_tree(f, "d");
    mr_artifact keep = publish(f, "keep.txt");
    mr_artifact drop = publish(f, "drop.txt");
    mr_artifact d = publish(f, "d");
    assert_int_equal(count_objects(f), 7);
    mr_artifact keep_list[] = {keep, d};

    mr_gc_stats gs;
    check(mr_store_gc(f->st, keep_list, 2, 1, &gs, &f->err), &f->err);
    assert_int_equal(gs.n_kept, 6); /* keep, d, and d's 4 distinct blobs */
    assert_int_equal(gs.n_deleted, 1);
    assert_int_equal(gs.bytes_deleted, 16);
    assert_int_equal(count_objects(f), 7); /* dry run */
    assert_true(mr_store_has(f->st, &drop));

    check(mr_store_gc(f->st, keep_list, 2, 0, &gs, &f->err), &f->err);
    assert_int_equal(gs.n_kept, 6);
    assert_int_equal(gs.n_deleted, 1);
    assert_int_equal(gs.bytes_deleted, 16);
    assert_int_equal(count_objects(f), 6);
    assert_false(mr_store_has(f->st, &drop));
    assert_true(mr_store_has(f->st, &keep));
    assert_true(mr_store_has(f->st, &d));
    /* the kept directory is still complete */
    problems pr = {0};
    mr_verify_stats vs;
    check(mr_store_verify(f->st, problem_fn, &pr, &vs, &f->err), &f->err);
    assert_int_equal(pr.n, 0);
    char *dest = mr_asprintf("%s/co", f->dir);
    assert_alloc(dest);
    check(mr_store_checkout(f->st, NULL, &d, dest, &f->err), &f->err);
    mr_free(dest);

    /* keeping nothing deletes everything */
    check(mr_store_gc(f->st, NULL, 0, 0, &gs, &f->err), &f->err);
    assert_int_equal(gs.n_kept, 0);
    assert_int_equal(gs.n_deleted, 6);
    assert_int_equal(count_objects(f), 0);
}

/* OOM torture: allocation k fails, k = 1..; publish and hash_paths return
 * MR_OK or MR_E_NOMEM, crash nothing and (under ASan) leak nothing. */
static void test_store_oom(void **state)
{
    fx *f = *state;
    int clean_runs = 0;
    char *want = expected_manifest();
    mr_hash128 want_hash = mr_hash_bytes(want, strlen(want));
    mr_free(want);
    for (long k = 1; k < 5000 && clean_runs < 3; k++) {
        char top[32];
        snprintf(top, sizeof(top), "t%ld", k);
        make_tree(f, top);
        char *p = wpath(f, top);
        const char *paths[] = {p};
        mr_artifact a;
        mr_error err;
        mr_error_init(&err);
        mr_alloc_fail_after(k);
        mr_status st = mr_store_hash_paths(f->st, NULL, paths, 1, &a, NULL, &err);
        mr_alloc_fail_after(0);
        if (st == MR_OK) assert_true(mr_hash_eq(a.hash, want_hash));
        else if (st != MR_E_NOMEM) fail_msg("hash_paths k=%ld: %s (%s)", k, mr_status_name(st), err.msg);
        mr_error_clear(&err);
        mr_alloc_fail_after(k);
        mr_status st2 = mr_store_publish(f->st, f->sc, p, &a, &err);
        mr_alloc_fail_after(0);
        if (st2 == MR_OK) assert_true(mr_hash_eq(a.hash, want_hash));
        else if (st2 != MR_E_NOMEM) fail_msg("publish k=%ld: %s (%s)", k, mr_status_name(st2), err.msg);
        else assert_status(err.code, MR_E_NOMEM);
        clean_runs = st == MR_OK && st2 == MR_OK ? clean_runs + 1 : 0;
        mr_free(p);
    }
    assert_int_equal(clean_runs, 3);
    /* whatever failed half-way, the store is consistent */
    problems pr = {0};
    mr_verify_stats vs;
    check(mr_store_verify(f->st, problem_fn, &pr, &vs, &f->err), &f->err);
    assert_int_equal(pr.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_artifact_id_round_trip),
        cmocka_unit_test_setup_teardown(test_publish_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publish_dedupes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publish_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hash_paths_matches_publish, setup, teardown),
        cmocka_unit_test_setup_teardown(test_publish_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkout_file_and_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkout_missing, setup, teardown),
        cmocka_unit_test(test_statcache_lookup),
        cmocka_unit_test_setup_teardown(test_statcache_used_by_hash_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_oom, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_clean_and_corrupt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_verify_missing_child, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_adopt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_oom, setup, teardown),
    };
    return mr_test_run(tests, NULL, NULL);
}
