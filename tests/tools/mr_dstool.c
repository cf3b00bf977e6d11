/* Test helper (not installed): writes and reads datasets through the public
 * API, for the DuckDB round-trip script and for humans.
 *
 *   mr_dstool write SRC DIR [-p COL[,COL]] [-s ROWS_PER_SHARD] [-g ROW_GROUP_ROWS] [-c CODEC]
 *                              any source (CSV, JSON lines, Parquet, glob, dataset) -> dataset
 *   mr_dstool dump DIR [-f FILTER] [-k COL[,COL]]
 *                              CSV of the selected rows (NULL for nulls), scan order
 *   mr_dstool explain DIR FILTER
 *                              the scan's explain report */
#include "millrace/dataset.h"

#include <stdlib.h>
#include <string.h>

static int fail(mr_error *err)
{
    mr_log_error(err);
    return 1;
}

static void put_cell(const mr_buf *b)
{
    int q = 0;
    for (size_t i = 0; i < b->len; i++)
        if (b->data[i] == ',' || b->data[i] == '"' || b->data[i] == '\n' || b->data[i] == '\r') q = 1;
    if (!q) {
        fwrite(b->data, 1, b->len, stdout);
        return;
    }
    putchar('"');
    for (size_t i = 0; i < b->len; i++) {
        if (b->data[i] == '"') putchar('"');
        putchar(b->data[i]);
    }
    putchar('"');
}

/* Splits "a,b" into a NULL-terminated array (pointers into a copy). */
static size_t split(char *s, const char **out, size_t max)
{
    size_t n = 0;
    for (char *p = s; p && n < max;) {
        char *c = strchr(p, ',');
        if (c) *c = 0;
        out[n++] = p;
        p = c ? c + 1 : NULL;
    }
    return n;
}

static int cmd_write(int argc, char **argv)
{
    if (argc < 2) return 2;
    mr_error err;
    mr_error_init(&err);
    mr_dataset_write_opts o;
    mr_dataset_write_opts_init(&o);
    const char *parts[16];
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-p")) {
            o.partition_by = parts;
            o.n_partition_by = split(argv[i + 1], parts, 16);
        } else if (!strcmp(argv[i], "-s")) {
            o.rows_per_shard = strtoull(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "-g")) {
            o.row_group_rows = strtoull(argv[i + 1], NULL, 10);
        } else if (!strcmp(argv[i], "-c")) {
            if (mr_parquet_codec_parse(argv[i + 1], &o.codec) != MR_OK) return 2;
        } else {
            return 2;
        }
    }
    mr_source *src;
    if (mr_source_open(argv[0], MR_SRC_AUTO, NULL, &src, &err) != MR_OK) return fail(&err);
    mr_dataset_writer *w;
    if (mr_dataset_writer_open(argv[1], &o, &w, &err) != MR_OK) {
        mr_source_close(src, NULL);
        return fail(&err);
    }
    mr_status rc;
    for (;;) {
        mr_table *t;
        rc = mr_source_next(src, 100000, &t, &err);
        if (rc != MR_OK || !t) break;
        rc = mr_dataset_writer_write(w, t, &err);
        mr_table_free(t);
        if (rc != MR_OK) break;
    }
    mr_source_close(src, NULL);
    if (rc != MR_OK) {
        mr_dataset_writer_free(w);
        return fail(&err);
    }
    mr_dataset_summary s;
    if (mr_dataset_writer_close(w, &s, &err) != MR_OK) return fail(&err);
    fprintf(stderr, "%llu rows, %llu shards, %llu partitions, %llu bytes\n", (unsigned long long)s.rows,
            (unsigned long long)s.shards, (unsigned long long)s.partitions, (unsigned long long)s.bytes);
    return 0;
}

static int cmd_dump(int argc, char **argv, int explain_only)
{
    if (argc < 1) return 2;
    mr_error err;
    mr_error_init(&err);
    const char *filter = explain_only && argc > 1 ? argv[1] : NULL;
    const char *cols[64];
    size_t n_cols = 0;
    int have_cols = 0;
    for (int i = 1; !explain_only && i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "-f")) filter = argv[i + 1];
        else if (!strcmp(argv[i], "-k")) n_cols = split(argv[i + 1], cols, 64), have_cols = 1;
        else return 2;
    }
    mr_dataset *ds;
    mr_dataset_scan *s;
    if (mr_dataset_open(argv[0], &ds, &err) != MR_OK) return fail(&err);
    if (mr_dataset_scan_open(ds, filter, have_cols ? cols : NULL, n_cols, &s, &err) != MR_OK) {
        mr_dataset_close(ds);
        return fail(&err);
    }
    mr_buf b;
    mr_buf_init(&b);
    int header = 0, rc = 0;
    if (!explain_only) {
        size_t nc = have_cols ? n_cols : mr_dataset_n_cols(ds);
        for (size_t j = 0; j < nc; j++) {
            b.len = 0;
            mr_buf_puts(&b, have_cols ? cols[j] : mr_dataset_col_name(ds, j));
            if (j) putchar(',');
            put_cell(&b);
        }
        putchar('\n');
        header = 1;
    }
    for (;;) {
        mr_table *t;
        if (mr_dataset_scan_next(s, &t, &err) != MR_OK) {
            rc = fail(&err);
            break;
        }
        if (!t) break;
        for (size_t i = 0; header && i < t->n_rows; i++) {
            for (size_t j = 0; j < t->n_cols; j++) {
                b.len = 0;
                mr_column_format(t->cols[j], i, &b);
                if (j) putchar(',');
                put_cell(&b);
            }
            putchar('\n');
        }
        mr_table_free(t);
    }
    if (explain_only && rc == 0) {
        mr_dataset_explain ex;
        mr_dataset_scan_explain(s, &ex);
        b.len = 0;
        mr_dataset_explain_format(&ex, &b);
        fputs(b.data, stdout);
    }
    mr_buf_free(&b);
    mr_dataset_scan_close(s);
    mr_dataset_close(ds);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 2;
    if (argc >= 2 && !strcmp(argv[1], "write")) rc = cmd_write(argc - 2, argv + 2);
    else if (argc >= 2 && !strcmp(argv[1], "dump")) rc = cmd_dump(argc - 2, argv + 2, 0);
    else if (argc >= 2 && !strcmp(argv[1], "explain")) rc = cmd_dump(argc - 2, argv + 2, 1);
    if (rc == 2) fprintf(stderr, "usage: mr_dstool write SRC DIR [-p COLS] [-s N] [-g N] [-c CODEC] | dump DIR [-f FILTER] [-k COLS] | explain DIR FILTER\n");
    return rc;
}
