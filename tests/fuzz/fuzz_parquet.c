/* libFuzzer target: opens a Parquet image from memory, reads every row
 * group (column by column and whole) and every chunk's statistics. Any
 * crash, sanitizer report or leak is a bug; errors are expected. Row groups
 * claiming more than 1M rows are skipped so that the fuzzer explores the
 * decoders instead of the allocator. The same bytes are then opened as a
 * ranged file (an object on S3: the footer from the last 64 KiB, each row
 * group's chunks fetched as coalesced ranges) and read again. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "millrace/parquet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

typedef struct mem_src {
    const uint8_t *data;
    size_t size;
} mem_src;

static mr_status mem_read(void *ctx, uint64_t off, size_t len, uint8_t *dst, mr_error *err)
{
    const mem_src *m = ctx;
    if (off > m->size || len > m->size - off) return MR_ERR(err, MR_E_IO, "read past the end");
    memcpy(dst, m->data + off, len);
    return MR_OK;
}

static void read_file(mr_parquet_file *f)
{
    mr_error err;
    mr_error_init(&err);
    for (size_t g = 0; g < mr_parquet_num_row_groups(f); g++) {
        if (mr_parquet_row_group_rows(f, g) > 1000000) continue;
        mr_parquet_range r[4];
        (void)mr_parquet_plan_ranges(f, g, NULL, 0, r, 4);
        for (size_t j = 0; j < mr_parquet_num_columns(f); j++) {
            mr_parquet_stats s;
            (void)mr_parquet_column_stats(f, g, j, &s, NULL);
            mr_table *t = NULL;
            mr_error_clear(&err);
            if (mr_parquet_read_row_group(f, g, &j, 1, &t, &err) == MR_OK) mr_table_free(t);
        }
    }
    mr_table *all = NULL;
    if (mr_parquet_num_rows(f) <= 1000000 && mr_parquet_read_all(f, NULL, 0, &all, NULL) == MR_OK) mr_table_free(all);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mr_error err;
    mr_error_init(&err);
    mr_parquet_file *f = NULL;
    if (mr_parquet_open_mem(data, size, "fuzz.parquet", &f, &err) == MR_OK) {
        read_file(f);
        mr_parquet_close(f);
    }
    mem_src m = {data, size};
    f = NULL;
    mr_error_clear(&err);
    if (mr_parquet_open_ranged("fuzz-ranged.parquet", size, mem_read, &m, NULL, &f, &err) == MR_OK) {
        read_file(f);
        mr_parquet_close(f);
    }
    return 0;
}
