/* Unit tests for WebDataset shards (src/data/webdataset.c): a table written
 * as a tar reads back equal (keys, binary and text columns, nulls as absent
 * members, numbers as text) in batches of any size, the same table gives
 * the same bytes, keys come from __key__, path or the row number, and a
 * member given twice in a sample or a truncated tar is an error naming it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "millrace/webdataset.h"

static char tmpdir[256];
static mr_error err;

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/mr-wds-XXXXXX", mr_test_tmpdir());
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

/* n samples: __key__ "s/00i", jpg bytes (with NULs), cls int64, txt (null every third). */
static mr_table *samples(size_t n, const char *key_col)
{
    mr_table *t = NULL;
    mr_column *k = NULL, *jpg = NULL, *cls = NULL, *txt = NULL;
    assert_ok(mr_table_new(&t, &err));
    assert_ok(mr_column_new(key_col, MR_T_STRING, n, &k, &err));
    assert_ok(mr_column_new("jpg", MR_T_STRING, n, &jpg, &err));
    jpg->kind.flags |= MR_KIND_BINARY;
    assert_ok(mr_column_new("cls", MR_T_INT64, n, &cls, &err));
    assert_ok(mr_column_new("txt", MR_T_STRING, n, &txt, &err));
    for (size_t i = 0; i < n; i++) {
        char key[32], bytes[64];
        snprintf(key, sizeof key, strcmp(key_col, "path") ? "s/%03zu" : "s/%03zu.x.jpg", i);
        assert_ok(mr_column_append_str(k, key, strlen(key)));
        for (size_t b = 0; b < sizeof bytes; b++) bytes[b] = (char)(b * i);
        assert_ok(mr_column_append_str(jpg, bytes, 1 + i % sizeof bytes));
        assert_ok(mr_column_append_int64(cls, (int64_t)(i % 3)));
        if (i % 3 == 2) assert_ok(mr_column_append_null(txt));
        else assert_ok(mr_column_append_str(txt, "a caption", 1 + i % 9));
    }
    assert_ok(mr_table_add_column(t, k, &err));
    assert_ok(mr_table_add_column(t, jpg, &err));
    assert_ok(mr_table_add_column(t, cls, &err));
    assert_ok(mr_table_add_column(t, txt, &err));
    return t;
}

static void write_tar(const char *path, const mr_table *t)
{
    mr_wds_writer *w = NULL;
    assert_ok(mr_wds_writer_open(path, &w, &err));
    assert_ok(mr_wds_writer_write(w, t, &err));
    uint64_t n = 0;
    assert_ok(mr_wds_writer_close(w, &n, &err));
    assert_int_equal(n, t->n_rows);
}

/* The whole tar read in batches of max_rows, appended into one table. */
static mr_table *read_tar(const char *path, size_t max_rows)
{
    mr_wds_reader *r = NULL;
    assert_ok(mr_wds_open(path, &r, &err));
    mr_table *all = NULL, *b = NULL;
    assert_ok(mr_table_new(&all, &err));
    for (;;) {
        mr_status rc = mr_wds_next(r, max_rows, &b, &err);
        if (rc != MR_OK) {
            mr_wds_close(r);
            mr_table_free(all);
            assert_ok(rc);
        }
        if (!b) break;
        assert_true(b->n_rows <= max_rows);
        mr_status ar = mr_table_append(all, b, &err);
        mr_table_free(b);
        if (ar != MR_OK) {
            mr_wds_close(r);
            mr_table_free(all);
            assert_ok(ar);
        }
    }
    mr_wds_close(r);
    return all;
}

static void check_str(const mr_column *c, size_t i, const char *want, size_t len)
{
    assert_false(mr_column_is_null(c, i));
    size_t l;
    const char *s = mr_column_str(c, i, &l);
    assert_int_equal(l, len);
    assert_memory_equal(s, want, len);
}

static void test_roundtrip(void **state)
{
    (void)state;
    mr_table *t = samples(10, "__key__");
    char *p = sub("a.tar"), *p2 = sub("b.tar");
    write_tar(p, t);
    write_tar(p2, t);
    char *d1 = NULL, *d2 = NULL;
    size_t l1 = 0, l2 = 0;
    assert_ok(mr_fs_read_file(p, 0, &d1, &l1, &err));
    assert_ok(mr_fs_read_file(p2, 0, &d2, &l2, &err));
    assert_int_equal(l1, l2);
    assert_memory_equal(d1, d2, l1); /* no owner, no time: the same bytes */
    mr_free(d1);
    mr_free(d2);
    for (size_t batch = 1; batch <= 11; batch += 3) {
        mr_table *b = read_tar(p, batch);
        assert_int_equal(b->n_rows, 10);
        assert_int_equal(b->n_cols, 4);
        const char *names[] = {"__key__", "cls", "jpg", "txt"}; /* the extensions sorted */
        for (size_t j = 0; j < 4; j++) assert_string_equal(b->cols[j]->name, names[j]);
        assert_true(b->cols[2]->kind.flags & MR_KIND_BINARY);
        assert_false(b->cols[3]->kind.flags & MR_KIND_BINARY); /* .txt is text */
        for (size_t i = 0; i < 10; i++) {
            char key[32], cls[4];
            snprintf(key, sizeof key, "s/%03zu", i);
            check_str(b->cols[0], i, key, strlen(key));
            snprintf(cls, sizeof cls, "%zu", i % 3);
            check_str(b->cols[1], i, cls, strlen(cls));
            size_t jl;
            const char *js = mr_column_str(mr_table_column(t, "jpg"), i, &jl);
            check_str(b->cols[2], i, js, jl);
            if (i % 3 == 2) assert_true(mr_column_is_null(b->cols[3], i));
            else check_str(b->cols[3], i, "a caption", 1 + i % 9);
        }
        mr_table_free(b);
    }
    mr_table_free(t);
    mr_free(p);
    mr_free(p2);
}

static void test_keys(void **state)
{
    (void)state;
    mr_table *t = samples(3, "path");
    char *p = sub("p.tar");
    write_tar(p, t);
    mr_table *b = read_tar(p, 100);
    check_str(b->cols[0], 1, "s/001_x", 7); /* path without its extension, the other dots '_' */
    assert_null(mr_table_column(b, "path"));
    mr_table_free(b);
    /* no key column: the row number */
    assert_ok(mr_table_rename_columns(t, (size_t[]){0}, (const char *[]){"name"}, 1, &err));
    write_tar(p, t);
    b = read_tar(p, 100);
    check_str(b->cols[0], 2, "000000002", 9);
    assert_non_null(mr_table_column(b, "name"));
    mr_table_free(b);
    mr_table_free(t);
    mr_free(p);
}

static void test_errors(void **state)
{
    (void)state;
    mr_table *t = samples(4, "__key__");
    /* two rows with one key: the second .jpg of a sample */
    mr_column *k2 = NULL;
    assert_ok(mr_column_new("__key__", MR_T_STRING, 4, &k2, &err));
    for (size_t i = 0; i < 4; i++) assert_ok(mr_column_append_str(k2, "same", 4));
    assert_ok(mr_table_set_column(t, 0, k2, &err));
    char *p = sub("dup.tar");
    write_tar(p, t);
    mr_wds_reader *r = NULL;
    mr_table *b = NULL;
    assert_ok(mr_wds_open(p, &r, &err));
    mr_error_clear(&err);
    assert_status(mr_wds_next(r, 10, &b, &err), MR_E_CORRUPT);
    assert_non_null(strstr(err.msg, "a second .jpg in sample 'same'"));
    mr_wds_close(r);
    /* truncated in the middle of a member */
    mr_table_free(t);
    t = samples(20, "__key__");
    write_tar(p, t);
    char *data = NULL;
    size_t len = 0;
    assert_ok(mr_fs_read_file(p, 0, &data, &len, &err));
    assert_ok(mr_fs_write_atomic(p, data, len / 2 + 100, &err));
    mr_free(data);
    mr_error_clear(&err);
    mr_status rc = mr_wds_open(p, &r, &err);
    if (rc == MR_OK) {
        for (;;) {
            rc = mr_wds_next(r, 3, &b, &err);
            if (rc != MR_OK || !b) break;
            mr_table_free(b);
        }
        mr_wds_close(r);
    }
    assert_status(rc, MR_E_CORRUPT);
    assert_non_null(strstr(err.msg, "dup.tar"));
    mr_error_clear(&err);
    char *none = sub("none.tar");
    assert_status(mr_wds_open(none, &r, &err), MR_E_NOT_FOUND);
    mr_free(none);
    mr_table_free(t);
    mr_free(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_keys, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_errors, setup_tmp, teardown_tmp),
    };
    return mr_test_run(tests, NULL, NULL);
}
