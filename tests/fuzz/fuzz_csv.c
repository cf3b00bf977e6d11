/* libFuzzer target for the CSV reader and writer: each input is written to a
 * private file (in /dev/shm when writable, else /tmp) and read whole in
 * chunks of 7 + size/64 bytes on 1 and on 2 threads (results must agree, content hashes
 * included: values, types and kinds), then streamed in
 * small batches (on one thread, as the round trip below). A table that reads is written back with the CSV writer and
 * read again: rows, column names, nulls and the values of string columns
 * must survive (numbers may change type: 1.0 comes back as the int 1, and a
 * string column of numbers and empty strings as numbers and nulls). Also
 * built with gcc for the corpus replay (replay.c), which ctest always runs. */
#include "millrace/csv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[128], path2[128];

/* The values of a string column a, read back as b. A column whose strings
 * all look like numbers may come back as numbers (docs/data.md, Writing CSV);
 * its empty strings are then written "" and read as null, as every quoted
 * empty field in a non-string column is. Any other change of a null or a
 * value is a broken promise. */
static int same_strings(const mr_column *a, const mr_column *b)
{
    for (size_t i = 0; i < a->n; i++) {
        int na = mr_column_is_null(a, i), nb = mr_column_is_null(b, i);
        if (!na && nb && a->type == MR_T_STRING && b->type != MR_T_STRING) {
            size_t l;
            mr_column_str(a, i, &l);
            if (l == 0) continue;
        }
        if (na != nb) return 0;
        if (mr_column_is_null(a, i) || a->type != MR_T_STRING || b->type != MR_T_STRING) continue;
        size_t la, lb;
        const char *sa = mr_column_str(a, i, &la), *sb = mr_column_str(b, i, &lb);
        if (la != lb || memcmp(sa, sb, la)) return 0;
    }
    return 1;
}

/* Writes what path reads as, reads that back, and aborts on any difference
 * the writer promises away. */
static void round_trip(const mr_csv_options *o)
{
    mr_table *t = NULL, *back = NULL;
    if (mr_csv_read(path, o, &t, NULL, NULL) != MR_OK) return;
    mr_error err;
    mr_error_init(&err);
    if (mr_csv_write_table(path2, t, ',', &err) != MR_OK) abort();
    mr_csv_options d;
    mr_csv_options_init(&d);
    d.chunk_size = 5;
    d.threads = 1;
    if (t->n_cols == 0) { /* no header to write: nothing to read back */
        mr_table_free(t);
        unlink(path2);
        return;
    }
    if (mr_csv_read(path2, &d, &back, NULL, &err) != MR_OK) abort();
    if (back->n_rows != t->n_rows || back->n_cols != t->n_cols) abort();
    for (size_t j = 0; j < t->n_cols; j++)
        if (strcmp(t->cols[j]->name, back->cols[j]->name) || !same_strings(t->cols[j], back->cols[j])) abort();
    mr_table_free(t);
    mr_table_free(back);
    unlink(path2);
}

static mr_status read_once(const mr_csv_options *o, size_t *rows, size_t *cols, mr_hash128 *h, char *msg,
                           size_t msg_len)
{
    mr_error err;
    mr_error_init(&err);
    mr_table *t = NULL;
    mr_status rc = mr_csv_read(path, o, &t, NULL, &err);
    *rows = t ? t->n_rows : 0;
    *cols = t ? t->n_cols : 0;
    *h = t ? mr_table_content_hash(t) : (mr_hash128){0, 0}; /* values, nulls, types and kinds */
    mr_error_format(&err, msg, msg_len);
    mr_table_free(t);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        mr_pool_init(2, NULL);
        /* tmpfs when there is one: a file on disk per execution halves the rate */
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof(path), "%s/mr_fuzz_csv_%ld.csv", dir, (long)getpid());
        snprintf(path2, sizeof(path2), "%s/mr_fuzz_csv_%ld.out.csv", dir, (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    mr_csv_options o;
    mr_csv_options_init(&o);
    o.chunk_size = 7 + size / 64; /* at least 64 chunk edges, not one per 7 bytes of a 4 KB input */
    o.sample_rows = 3;
    o.max_field_len = 1 << 20;
    o.on_error = size && (data[0] & 1) ? MR_ON_ERROR_SKIP : MR_ON_ERROR_FAIL;
    o.no_header = size && (data[0] & 2);
    size_t r1, c1, r2, c2;
    mr_hash128 h1, h2;
    char m1[1024], m2[1024];
    o.threads = 1;
    mr_status s1 = read_once(&o, &r1, &c1, &h1, m1, sizeof(m1));
    o.threads = 2;
    mr_status s2 = read_once(&o, &r2, &c2, &h2, m2, sizeof(m2));
    if (s1 != s2 || r1 != r2 || c1 != c2 || h1.lo != h2.lo || h1.hi != h2.hi || strcmp(m1, m2))
        abort(); /* thread count changed the result */
    /* The streaming reader and the round trip on one thread: the comparison
     * above covers the threads, and each pool hand-off (three per threaded
     * read) costs more than a small input's parse */
    o.threads = 1;
    mr_csv_reader *r = NULL;
    if (mr_csv_reader_open(path, &o, &r, NULL) == MR_OK) {
        mr_table *b = NULL;
        while (mr_csv_reader_next(r, 3, &b, NULL) == MR_OK && b) mr_table_free(b);
        mr_csv_reader_close(r, NULL);
    }
    o.on_error = MR_ON_ERROR_SKIP;
    round_trip(&o);
    unlink(path);
    return 0;
}
