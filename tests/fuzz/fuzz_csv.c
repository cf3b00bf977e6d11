/* libFuzzer target for the CSV reader: each input is written to a private
 * temp file and read whole with tiny chunks on 1 and on 2 threads (results
 * must agree), then streamed in small batches. Also built with gcc for the
 * corpus replay (replay.c), which ctest always runs. */
#include "millrace/csv.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[128];

static mr_status read_once(const mr_csv_options *o, size_t *rows, size_t *cols, char *msg, size_t msg_len)
{
    mr_error err;
    mr_error_init(&err);
    mr_table *t = NULL;
    mr_status rc = mr_csv_read(path, o, &t, NULL, &err);
    *rows = t ? t->n_rows : 0;
    *cols = t ? t->n_cols : 0;
    mr_error_format(&err, msg, msg_len);
    mr_table_free(t);
    return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        mr_pool_init(2, NULL);
        snprintf(path, sizeof(path), "/tmp/mr_fuzz_csv_%ld.csv", (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    mr_csv_options o;
    mr_csv_options_init(&o);
    o.chunk_size = 7;
    o.sample_rows = 3;
    o.max_field_len = 1 << 20;
    o.on_error = size && (data[0] & 1) ? MR_ON_ERROR_SKIP : MR_ON_ERROR_FAIL;
    o.no_header = size && (data[0] & 2);
    size_t r1, c1, r2, c2;
    char m1[1024], m2[1024];
    o.threads = 1;
    mr_status s1 = read_once(&o, &r1, &c1, m1, sizeof(m1));
    o.threads = 2;
    mr_status s2 = read_once(&o, &r2, &c2, m2, sizeof(m2));
    if (s1 != s2 || r1 != r2 || c1 != c2 || strcmp(m1, m2)) abort(); /* thread count changed the result */
    mr_csv_reader *r = NULL;
    if (mr_csv_reader_open(path, &o, &r, NULL) == MR_OK) {
        mr_table *b = NULL;
        while (mr_csv_reader_next(r, 3, &b, NULL) == MR_OK && b) mr_table_free(b);
        mr_csv_reader_close(r, NULL);
    }
    unlink(path);
    return 0;
}
