/* Unit tests for packing files into a dataset (src/data/files_ingest.c):
 * the pattern's matching ("**", hidden names, a plain directory), every
 * file's bytes back byte for byte in path order with parent-dir labels,
 * the same shards at 1 and 2 threads, a labels file joined by path (a
 * missing row null, an escaping or repeated path refused with its row),
 * symbolic links (inside read, outside refused or skipped), and a resume
 * after the process died between two shards equal to an uninterrupted run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "millrace/dataset.h"
#include "millrace/io.h"

static char tmpdir[256];
static mr_error err;

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/mr-files-XXXXXX", mr_test_tmpdir());
    mr_error_init(&err);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    mr_fs_rmtree(tmpdir, NULL);
    return 0;
}

static char *sub(const char *rel)
{
    char *p = mr_path_join(tmpdir, rel);
    assert_alloc(p);
    return p;
}

/* Writes tmpdir/rel with len bytes of a pattern seeded by seed (directories made). */
static void put(const char *rel, size_t len, unsigned seed)
{
    char *p = sub(rel);
    char *slash = strrchr(p, '/');
    *slash = '\0';
    assert_ok(mr_fs_mkdirs(p, &err));
    *slash = '/';
    char *data = malloc(len + 1);
    assert_non_null(data);
    for (size_t i = 0; i < len; i++) data[i] = (char)((i * 131 + seed * 7919) >> 3);
    assert_ok(mr_fs_write_atomic(p, data, len, &err));
    free(data);
    mr_free(p);
}

static void tree(void)
{
    put("imgs/top.jpg", 10, 1);
    put("imgs/a/x.jpg", 300, 2);
    put("imgs/a/b/y.jpg", 0, 3);
    put("imgs/a/b/c/z.jpg", 5000, 4);
    put("imgs/a/.dot.jpg", 7, 5);
    put("imgs/.h/q.jpg", 8, 6);
    put("imgs/a/n.txt", 9, 7);
}

/* The matches of pattern (relative to tmpdir), joined by spaces, as paths under tmpdir. */
static char *matches(const char *pattern)
{
    char *pat = sub(pattern), **paths = NULL;
    size_t n = 0;
    mr_status rc = mr_files_match(pat, &paths, &n, &err);
    mr_free(pat);
    if (rc != MR_OK) return NULL;
    mr_buf b;
    mr_buf_init(&b);
    size_t skip = strlen(tmpdir) + 1;
    for (size_t i = 0; i < n; i++) {
        assert_true(strlen(paths[i]) > skip);
        assert_ok(mr_buf_printf(&b, "%s%s", i ? " " : "", paths[i] + skip));
    }
    mr_files_match_free(paths, n);
    return b.data;
}

static void test_match(void **state)
{
    (void)state;
    tree();
    char *m = matches("imgs/**/*.jpg");
    assert_alloc(m);
    assert_string_equal(m, "imgs/a/b/c/z.jpg imgs/a/b/y.jpg imgs/a/x.jpg imgs/top.jpg");
    mr_free(m);
    m = matches("imgs/a/*/*.jpg");
    assert_alloc(m);
    assert_string_equal(m, "imgs/a/b/y.jpg");
    mr_free(m);
    m = matches("imgs/**/.*.jpg");
    assert_alloc(m);
    assert_string_equal(m, "imgs/a/.dot.jpg");
    mr_free(m);
    m = matches("imgs/a"); /* a directory: every file under it */
    assert_alloc(m);
    assert_string_equal(m, "imgs/a/b/c/z.jpg imgs/a/b/y.jpg imgs/a/n.txt imgs/a/x.jpg");
    mr_free(m);
    char *pat = sub("imgs/**/*.png"), **paths = NULL;
    size_t n = 0;
    assert_status(mr_files_match(pat, &paths, &n, &err), MR_E_NOT_FOUND);
    mr_free(pat);
    mr_error_clear(&err);
    pat = sub("imgs/*/../../*.jpg");
    assert_status(mr_files_match(pat, &paths, &n, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "'..'"));
    mr_free(pat);
}

/* The dataset at dir as a table (rows in path order). */
static mr_table *read_ds(const char *dir)
{
    mr_table *t = NULL;
    mr_status rc = mr_table_read_file(dir, &t, &err);
    assert_ok(rc);
    return t;
}

static void check_bytes(const mr_table *t, const char *base)
{
    const mr_column *p = mr_table_column(t, "path"), *im = mr_table_column(t, "image");
    assert_non_null(p);
    assert_non_null(im);
    assert_true(im->kind.flags & MR_KIND_BINARY);
    for (size_t i = 0; i < t->n_rows; i++) {
        size_t pl, bl, fl = 0;
        const char *ps = mr_column_str(p, i, &pl);
        const char *bs = mr_column_str(im, i, &bl);
        char rel[512];
        snprintf(rel, sizeof rel, "%s/%.*s", base, (int)pl, ps);
        char *full = sub(rel), *data = NULL;
        assert_ok(mr_fs_read_file(full, 0, &data, &fl, &err));
        assert_int_equal(bl, fl);
        assert_memory_equal(bs, data, fl);
        mr_free(data);
        mr_free(full);
    }
}

static void test_bytes_labels(void **state)
{
    (void)state;
    tree();
    mr_files_opts o;
    mr_files_opts_init(&o);
    o.label_from = MR_LABEL_PARENT_DIR;
    o.write.rows_per_shard = 3;
    char *pat = sub("imgs/**/*.jpg"), *out = sub("out"), *work = sub("work");
    o.work = work;
    mr_files_stats st;
    assert_ok(mr_files_ingest(pat, out, &o, &st, &err));
    assert_int_equal(st.files, 4);
    assert_int_equal(st.rows_written, 4);
    assert_int_equal(st.dataset.shards, 2);
    assert_int_equal(st.bytes_read, 5310);
    assert_false(mr_fs_exists(work)); /* removed once the dataset is complete */
    mr_table *t = read_ds(out);
    assert_int_equal(t->n_rows, 4);
    assert_int_equal(t->n_cols, 3);
    const char *want_path[] = {"a/b/c/z.jpg", "a/b/y.jpg", "a/x.jpg", "top.jpg"};
    const char *want_label[] = {"c", "b", "a", NULL};
    const mr_column *p = mr_table_column(t, "path"), *l = mr_table_column(t, "label");
    assert_non_null(l);
    for (size_t i = 0; i < 4; i++) {
        size_t len;
        const char *s = mr_column_str(p, i, &len);
        assert_int_equal(len, strlen(want_path[i]));
        assert_memory_equal(s, want_path[i], len);
        if (!want_label[i]) {
            assert_true(mr_column_is_null(l, i));
            continue;
        }
        s = mr_column_str(l, i, &len);
        assert_int_equal(len, strlen(want_label[i]));
        assert_memory_equal(s, want_label[i], len);
    }
    check_bytes(t, "imgs");
    mr_table_free(t);
    mr_files_stats_free(&st);
    mr_free(pat);
    mr_free(out);
    mr_free(work);
}

/* 1 when the regular files of directories a and b are equal, name by name. */
static int same_dirs(const char *a, const char *b)
{
    DIR *d = opendir(a);
    assert_non_null(d);
    struct dirent *e;
    int same = 1, n = 0;
    while (same && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') continue;
        char *pa = mr_path_join(a, e->d_name), *pb = mr_path_join(b, e->d_name);
        char *da = NULL, *db = NULL;
        size_t la = 0, lb = 0;
        assert_ok(mr_fs_read_file(pa, 0, &da, &la, &err));
        same = mr_fs_read_file(pb, 0, &db, &lb, NULL) == MR_OK && la == lb && !memcmp(da, db, la);
        n++;
        mr_free(da);
        mr_free(db);
        mr_free(pa);
        mr_free(pb);
    }
    closedir(d);
    return same && n > 1;
}

static void test_threads_identical(void **state)
{
    (void)state;
    for (int i = 0; i < 40; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "imgs/d%d/f%02d.bin", i % 3, i);
        put(rel, (size_t)(i * 37 % 500), (unsigned)i);
    }
    assert_ok(mr_pool_init(2, &err));
    char *pat = sub("imgs"), *o1 = sub("o1"), *o2 = sub("o2");
    mr_files_opts o;
    mr_files_opts_init(&o);
    o.column = "blob";
    o.write.row_group_bytes = 2000; /* shards cut by bytes */
    o.threads = 1;
    mr_files_stats st;
    assert_ok(mr_files_ingest(pat, o1, &o, &st, &err));
    assert_true(st.dataset.shards > 3);
    o.threads = 2;
    assert_ok(mr_files_ingest(pat, o2, &o, NULL, &err));
    assert_true(same_dirs(o1, o2));
    mr_table *t = read_ds(o1);
    assert_int_equal(t->n_rows, 40);
    assert_non_null(mr_table_column(t, "blob"));
    mr_table_free(t);
    mr_free(pat);
    mr_free(o1);
    mr_free(o2);
}

/* shuffle: the same rows (each file once, with its bytes and label) in an order fixed by the
 * seed: the same at 1 and 2 threads and on a second call, another for another seed, not the
 * sorted one. */
static void test_shuffle(void **state)
{
    (void)state;
    for (int i = 0; i < 60; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "imgs/c%d/f%02d.bin", i / 20, i);
        put(rel, (size_t)(1 + i * 13 % 200), (unsigned)i);
    }
    assert_ok(mr_pool_init(2, &err));
    char *pat = sub("imgs"), *o0 = sub("o0"), *o1 = sub("o1"), *o2 = sub("o2"), *o3 = sub("o3");
    mr_files_opts o;
    mr_files_opts_init(&o);
    o.label_from = MR_LABEL_PARENT_DIR;
    o.write.row_group_bytes = 1500;
    assert_ok(mr_files_ingest(pat, o0, &o, NULL, &err));
    o.shuffle = 1;
    o.shuffle_seed = 42;
    o.threads = 1;
    assert_ok(mr_files_ingest(pat, o1, &o, NULL, &err));
    o.threads = 2;
    assert_ok(mr_files_ingest(pat, o2, &o, NULL, &err));
    assert_true(same_dirs(o1, o2));
    o.shuffle_seed = 43;
    assert_ok(mr_files_ingest(pat, o3, &o, NULL, &err));
    mr_table *sorted = read_ds(o0), *a = read_ds(o1), *b = read_ds(o3);
    assert_int_equal(a->n_rows, 60);
    assert_int_equal(b->n_rows, 60);
    const mr_column *ps = mr_table_column(sorted, "path"), *pa = mr_table_column(a, "path"),
                    *pb = mr_table_column(b, "path"), *ia = mr_table_column(a, "image"),
                    *la = mr_table_column(a, "label"), *is = mr_table_column(sorted, "image");
    size_t moved = 0, differ = 0;
    for (size_t i = 0; i < 60; i++) {
        size_t l1, l2;
        const char *s1 = mr_column_str(ps, i, &l1), *s2 = mr_column_str(pa, i, &l2);
        moved += l1 != l2 || memcmp(s1, s2, l1);
        const char *s3 = mr_column_str(pb, i, &l1);
        differ += l1 != l2 || memcmp(s3, s2, l1);
        /* row i of the shuffled dataset is file f: its bytes and label are f's */
        int f = atoi(s2 + l2 - 6);
        size_t lb, ls;
        const char *bytes = mr_column_str(ia, i, &lb), *want = mr_column_str(is, (size_t)f, &ls);
        assert_int_equal(lb, ls);
        assert_memory_equal(bytes, want, lb);
        size_t ll;
        const char *lab = mr_column_str(la, i, &ll);
        assert_int_equal(ll, 2);
        assert_int_equal(lab[1], '0' + f / 20);
    }
    assert_true(moved > 40);  /* not the path order */
    assert_true(differ > 40); /* another seed, another order */
    mr_table_free(sorted);
    mr_table_free(a);
    mr_table_free(b);
    mr_free(pat);
    mr_free(o0);
    mr_free(o1);
    mr_free(o2);
    mr_free(o3);
}

static void test_labels_file(void **state)
{
    (void)state;
    tree();
    char *lab = sub("labels.csv"), *pat = sub("imgs/**/*.jpg"), *out = sub("out");
    const char *text = "path,label,weight\na/x.jpg,cat,0.5\n./top.jpg,dog,2\nnot/there.jpg,bird,1\na/b/c/z.jpg,cat,1.5\n";
    assert_ok(mr_fs_write_atomic(lab, text, strlen(text), &err));
    mr_files_opts o;
    mr_files_opts_init(&o);
    o.labels = lab;
    mr_files_stats st;
    assert_ok(mr_files_ingest(pat, out, &o, &st, &err));
    assert_int_equal(st.labels_missing, 1); /* a/b/y.jpg */
    mr_table *t = read_ds(out);
    assert_int_equal(t->n_cols, 4); /* path, image, label, weight */
    const mr_column *l = mr_table_column(t, "label"), *w = mr_table_column(t, "weight");
    assert_non_null(l);
    assert_non_null(w);
    assert_true(mr_column_is_null(l, 1));
    assert_true(mr_column_is_null(w, 1));
    size_t len;
    const char *s = mr_column_str(l, 3, &len);
    assert_int_equal(len, 3);
    assert_memory_equal(s, "dog", 3);
    assert_true(((const double *)w->data)[0] == 1.5);
    mr_table_free(t);
    mr_files_stats_free(&st);
    /* a path out of the base, a path given twice: refused, naming the row */
    const char *bad[] = {"path,label\na/x.jpg,1\n../x.jpg,2\n", "path,label\na/x.jpg,1\n./a//x.jpg,2\n"};
    const char *why[] = {"labels file row 2: path '../x.jpg' is outside the base directory",
                         "labels file row 2: path 'a/x.jpg' was given already, in row 1"};
    for (int k = 0; k < 2; k++) {
        assert_ok(mr_fs_write_atomic(lab, bad[k], strlen(bad[k]), &err));
        char *o2 = sub(k ? "bad2" : "bad1");
        mr_error_clear(&err);
        assert_status(mr_files_ingest(pat, o2, &o, NULL, &err), MR_E_INVALID_ARG);
        assert_string_equal(err.msg, why[k]);
        assert_non_null(strstr(err.file, "labels.csv"));
        assert_false(mr_fs_exists(o2));
        mr_free(o2);
    }
    mr_free(lab);
    mr_free(pat);
    mr_free(out);
}

static void test_links(void **state)
{
    (void)state;
    tree();
    put("outside/secret.jpg", 6, 9);
    char *target = sub("outside/secret.jpg"), *lnk = sub("imgs/a/evil.jpg"), *inl = sub("imgs/a/alias.jpg");
    assert_int_equal(symlink(target, lnk), 0);
    assert_int_equal(symlink("x.jpg", inl), 0);
    char *pat = sub("imgs/**/*.jpg"), *out = sub("out"), *out2 = sub("out2");
    mr_files_opts o;
    mr_files_opts_init(&o);
    mr_error_clear(&err);
    assert_status(mr_files_ingest(pat, out, &o, NULL, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "evil.jpg: a symbolic link to a file outside the base directory"));
    assert_false(mr_fs_exists(out));
    o.on_error = MR_ON_ERROR_SKIP;
    mr_files_stats st;
    assert_ok(mr_files_ingest(pat, out2, &o, &st, &err));
    assert_int_equal(st.files_skipped, 1);
    assert_string_equal(st.skipped[0], "a/evil.jpg: a symbolic link to a file outside the base directory");
    assert_int_equal(st.rows_written, 5); /* the link inside is read */
    mr_table *t = read_ds(out2);
    check_bytes(t, "imgs");
    mr_table_free(t);
    mr_files_stats_free(&st);
    mr_free(target);
    mr_free(lnk);
    mr_free(inl);
    mr_free(pat);
    mr_free(out);
    mr_free(out2);
}

/* The progress callback of a child that dies, as kill -9 would, after `die_after` shards. */
static uint64_t die_after, shards_seen;
static void die(void *ctx, uint64_t done, uint64_t total)
{
    (void)ctx, (void)done, (void)total;
    if (++shards_seen == die_after) _exit(137);
}

/* The process dies after two shards; the next call keeps them. */
static void test_resume(void **state)
{
    (void)state;
    for (int i = 0; i < 25; i++) {
        char rel[64];
        snprintf(rel, sizeof rel, "imgs/c%d/%02d.png", i % 2, i);
        put(rel, (size_t)(50 + i), (unsigned)i);
    }
    char *pat = sub("imgs/**/*.png"), *out = sub("out"), *ref = sub("ref"), *work = sub("work");
    mr_files_opts o;
    mr_files_opts_init(&o);
    o.label_from = MR_LABEL_PARENT_DIR;
    o.write.rows_per_shard = 4;
    o.work = work;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        die_after = 2;
        o.progress = die;
        mr_files_ingest(pat, out, &o, NULL, NULL);
        _exit(0); /* not reached when the hook fires */
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    assert_true(WIFEXITED(ws));
    assert_int_equal(WEXITSTATUS(ws), 137);
    assert_true(mr_fs_exists(work));
    mr_files_stats st;
    assert_ok(mr_files_ingest(pat, out, &o, &st, &err));
    assert_int_equal(st.shards_resumed, 2);
    assert_int_equal(st.bytes_read, 25 * 50 + 300 - (8 * 50 + 56)); /* shards 0-1 were not read again */
    o.work = NULL;
    assert_ok(mr_files_ingest(pat, ref, &o, NULL, &err));
    assert_true(same_dirs(out, ref));
    /* a changed file list: the old work is not resumed */
    o.work = work;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        die_after = 1;
        o.progress = die;
        mr_files_ingest(pat, sub("out3"), &o, NULL, NULL);
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    put("imgs/c0/99.png", 3, 99);
    char *out4 = sub("out4");
    assert_ok(mr_files_ingest(pat, out4, &o, &st, &err));
    assert_int_equal(st.shards_resumed, 0);
    assert_int_equal(st.rows_written, 26);
    mr_free(out4);
    mr_free(pat);
    mr_free(out);
    mr_free(ref);
    mr_free(work);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_match, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_bytes_labels, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_threads_identical, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_labels_file, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_shuffle, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_links, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_resume, setup_tmp, teardown_tmp),
    };
    return mr_test_run(tests, NULL, NULL);
}
