/* libFuzzer target: opens a Parquet image from memory, reads every row
 * group (column by column and whole) and every chunk's statistics. Any
 * crash, sanitizer report or leak is a bug; errors are expected. Row groups
 * claiming more than 1M rows are skipped so that the fuzzer explores the
 * decoders instead of the allocator. */
#include <stddef.h>
#include <stdint.h>

#include "millrace/parquet.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mr_error err;
    mr_error_init(&err);
    mr_parquet_file *f = NULL;
    if (mr_parquet_open_mem(data, size, "fuzz.parquet", &f, &err) != MR_OK) return 0;
    for (size_t g = 0; g < mr_parquet_num_row_groups(f); g++) {
        if (mr_parquet_row_group_rows(f, g) > 1000000) continue;
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
    mr_parquet_close(f);
    return 0;
}
