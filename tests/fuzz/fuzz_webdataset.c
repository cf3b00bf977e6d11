/* libFuzzer target for the WebDataset reader and writer (src/data/webdataset.c, on
 * libarchive): each input is a tar (or anything) written to a private file in /dev/shm
 * (else /tmp) and read twice, in batches of one sample and whole. Aborts when a property
 * the reader promises breaks:
 *   - a failure without a message, or with a status webdataset.h does not list;
 *   - the two reads differ in status, message, columns, rows or any value (the batch
 *     size must not show);
 *   - a table whose columns disagree on the row count, whose first column is not
 *     `__key__`, or whose other columns are not sorted by name;
 *   - a tar that reads does not come back equal through the writer (same keys, columns
 *     and values), unless a key is empty (the writer refuses it: MR_E_INVALID_ARG).
 * Also built with any compiler for the corpus replay (replay.c), which ctest always
 * runs. */
#include "millrace/webdataset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[128], path2[128];

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_webdataset: property broken: %s\n", what);
    abort();
}

/* Reads the tar at p in batches of max_rows into one table (*out, NULL on failure). */
static mr_status read_all(const char *p, size_t max_rows, mr_table **out, char *msg, size_t msg_len)
{
    *out = NULL;
    msg[0] = '\0';
    mr_error err;
    mr_error_init(&err);
    mr_wds_reader *r = NULL;
    mr_status rc = mr_wds_open(p, &r, &err);
    mr_table *all = NULL, *t = NULL;
    while (rc == MR_OK && (rc = mr_wds_next(r, max_rows, &t, &err)) == MR_OK && t) {
        if (!all) {
            all = t;
        } else {
            rc = mr_table_append(all, t, &err);
            mr_table_free(t);
        }
        t = NULL;
    }
    mr_wds_close(r);
    if (rc != MR_OK) {
        check(rc == MR_E_NOT_FOUND || rc == MR_E_IO || rc == MR_E_CORRUPT || rc == MR_E_LIMIT || rc == MR_E_NOMEM,
              "a status webdataset.h lists");
        mr_error_format(&err, msg, msg_len);
        check(msg[0] != '\0', "a failure has a message");
        mr_table_free(all);
        return rc;
    }
    *out = all;
    return MR_OK;
}

/* a and b hold the same columns (names, types) and values, row for row. */
static int same_tables(const mr_table *a, const mr_table *b)
{
    if (!a || !b) return a == b;
    if (a->n_rows != b->n_rows || a->n_cols != b->n_cols) return 0;
    for (size_t j = 0; j < a->n_cols; j++) {
        const mr_column *x = a->cols[j], *y = b->cols[j];
        if (strcmp(x->name, y->name) || x->type != y->type) return 0;
        for (size_t i = 0; i < a->n_rows; i++) {
            int nx = mr_column_is_null(x, i), ny = mr_column_is_null(y, i);
            if (nx != ny) return 0;
            if (nx) continue;
            size_t lx, ly;
            const char *sx = mr_column_str(x, i, &lx), *sy = mr_column_str(y, i, &ly);
            if (lx != ly || memcmp(sx, sy, lx)) return 0;
        }
    }
    return 1;
}

static void check_shape(const mr_table *t)
{
    check(t->n_cols >= 1 && !strcmp(t->cols[0]->name, "__key__"), "the first column is __key__");
    for (size_t j = 0; j < t->n_cols; j++) check(t->cols[j]->n == t->n_rows, "columns agree on the row count");
    for (size_t j = 2; j < t->n_cols; j++)
        check(strcmp(t->cols[j - 1]->name, t->cols[j]->name) < 0, "the extension columns are sorted by name");
}

static void round_trip(const mr_table *t)
{
    const mr_column *key = t->cols[0];
    int empty_key = 0;
    for (size_t i = 0; i < t->n_rows; i++) {
        size_t l = 0;
        if (mr_column_is_null(key, i) || (mr_column_str(key, i, &l), l == 0)) empty_key = 1;
    }
    mr_error err;
    mr_error_init(&err);
    mr_wds_writer *w = NULL;
    check(mr_wds_writer_open(path2, &w, &err) == MR_OK, "the writer opens");
    mr_status rc = mr_wds_writer_write(w, t, &err);
    if (rc != MR_OK) {
        mr_wds_writer_free(w);
        check(rc == MR_E_NOMEM || (rc == MR_E_INVALID_ARG && empty_key), "the writer takes what the reader gave");
        return;
    }
    uint64_t n = 0;
    check(mr_wds_writer_close(w, &n, &err) == MR_OK, "the writer publishes the tar");
    check(n == t->n_rows, "every sample written");
    mr_table *back = NULL;
    char msg[512];
    rc = read_all(path2, 0, &back, msg, sizeof msg);
    if (rc == MR_E_NOMEM) return;
    check(rc == MR_OK, "the written tar reads");
    if (t->n_rows == 0) check(!back || back->n_rows == 0, "no samples, none back");
    else check(same_tables(t, back), "the written tar reads back equal");
    mr_table_free(back);
    unlink(path2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof(path), "%s/mr_fuzz_wds_%ld.tar", dir, (long)getpid());
        snprintf(path2, sizeof(path2), "%s/mr_fuzz_wds_%ld.out.tar", dir, (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    mr_table *one = NULL, *whole = NULL;
    char m1[1024], m2[1024];
    mr_status s1 = read_all(path, 1, &one, m1, sizeof m1);
    mr_status s2 = read_all(path, 0, &whole, m2, sizeof m2);
    if (s1 != MR_E_NOMEM && s2 != MR_E_NOMEM) {
        check(s1 == s2, "the status does not depend on the batch size");
        check(!strcmp(m1, m2), "the message does not depend on the batch size");
        check(same_tables(one, whole), "the samples do not depend on the batch size");
    }
    if (s2 == MR_OK && whole) {
        check_shape(whole);
        round_trip(whole);
    }
    mr_table_free(one);
    mr_table_free(whole);
    unlink(path);
    return 0;
}
