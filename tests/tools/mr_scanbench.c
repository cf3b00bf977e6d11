/* Bench helper (not installed): scans every float column of a dataset into
 * one preallocated float64 array per column (what a trainer's loader does),
 * then times memcpy of the same number of bytes on this machine, and prints
 * one JSON line: rows, bytes, seconds of each, and checksums (column sums).
 *
 *   mr_scanbench DIR [REPS]      best of REPS (default 3) for both */
#include "millrace/dataset.h"

#include <malloc.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: mr_scanbench DIR [REPS]\n");
        return 2;
    }
    /* The same allocator policy as the millrace CLI (cli/main.c). */
    mallopt(M_MMAP_THRESHOLD, 32 << 20); /* glibc's maximum on 64-bit */
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
    int reps = argc > 2 ? (int)strtol(argv[2], NULL, 10) : 3;
    mr_error err;
    mr_error_init(&err);
    mr_dataset *ds = NULL;
    if (mr_dataset_open(argv[1], &ds, &err) != MR_OK) {
        mr_log_error(&err);
        return 1;
    }
    size_t rows = (size_t)mr_dataset_n_rows(ds), nf = 0;
    const char *names[256];
    for (size_t j = 0; j < mr_dataset_n_cols(ds) && nf < 256; j++)
        if (mr_dataset_col_type(ds, j) == MR_T_FLOAT64) names[nf++] = mr_dataset_col_name(ds, j);
    double **cols = mr_calloc(nf ? nf : 1, sizeof *cols);
    for (size_t k = 0; k < nf; k++) {
        cols[k] = mr_malloc(rows * sizeof(double) + 1);
        memset(cols[k], 0, rows * sizeof(double)); /* fault the pages in outside the timing */
    }
    double best_scan = 1e30, best_copy = 1e30;
    uint64_t bytes_read = 0;
    for (int r = 0; r < reps; r++) {
        mr_dataset_scan *s = NULL;
        double t0 = mr_now();
        if (mr_dataset_scan_open(ds, NULL, names, nf, &s, &err) != MR_OK) {
            mr_log_error(&err);
            return 1;
        }
        size_t off = 0;
        mr_table *t = NULL;
        while (mr_dataset_scan_next(s, &t, &err) == MR_OK && t) {
            for (size_t k = 0; k < nf; k++) memcpy(cols[k] + off, t->cols[k]->data, t->n_rows * sizeof(double));
            off += t->n_rows;
            mr_table_free(t);
        }
        if (mr_error_is_set(&err)) {
            mr_log_error(&err);
            return 1;
        }
        double dt = mr_now() - t0;
        mr_dataset_explain ex;
        mr_dataset_scan_explain(s, &ex);
        bytes_read = ex.bytes_read;
        mr_dataset_scan_close(s);
        if (off != rows) {
            fprintf(stderr, "mr_scanbench: scanned %zu rows, manifest says %zu\n", off, rows);
            return 1;
        }
        if (dt < best_scan) best_scan = dt;
    }
    size_t bytes = rows * nf * sizeof(double);
    char *src = mr_malloc(bytes + 1), *dst = mr_malloc(bytes + 1);
    memset(src, 1, bytes);
    memset(dst, 2, bytes);
    for (int r = 0; r < reps; r++) {
        double t0 = mr_now();
        memcpy(dst, src, bytes);
        double dt = mr_now() - t0;
        if (dt < best_copy) best_copy = dt;
    }
    printf("{\"rows\": %zu, \"float_columns\": %zu, \"bytes\": %zu, \"bytes_read\": %llu, \"scan_s\": %.6f, "
           "\"memcpy_s\": %.6f, \"dst_check\": %d, \"sums\": [",
           rows, nf, bytes, (unsigned long long)bytes_read, best_scan, best_copy, dst[bytes / 2]);
    for (size_t k = 0; k < nf; k++) {
        double sum = 0;
        for (size_t i = 0; i < rows; i++) sum += cols[k][i];
        printf("%s%.17g", k ? ", " : "", sum);
        mr_free(cols[k]);
    }
    printf("]}\n");
    mr_free(cols);
    mr_free(src);
    mr_free(dst);
    mr_dataset_close(ds);
    return 0;
}
