/* mr_table_read_file / mr_table_write_file: dispatch on the file name. */
#include "millrace/io.h"
#include "millrace/csv.h"
#include "millrace/dataset.h"
#include "millrace/jsonl.h"
#include "millrace/parquet.h"

#include <string.h>
#include <errno.h>
#include <stdio.h>
#include <strings.h>
#include <unistd.h>

static int ends_with(const char *s, const char *suffix)
{
    size_t ls = strlen(s), lx = strlen(suffix);
    return ls >= lx && !strcasecmp(s + ls - lx, suffix);
}

mr_status mr_table_read_file(const char *path, mr_table **out, mr_error *err)
{
    *out = NULL;
    int s3 = !strncmp(path, "s3://", 5);
    if (s3 || mr_fs_is_dir(path) || strpbrk(path, "*?[")) {
        /* A dataset (manifest.json), a directory of data files, or a glob. */
        mr_source *src = NULL;
        mr_table *all = NULL, *batch = NULL;
        /* A dataset knows its row count: the first batch's columns are
         * adopted and sized for every row at once, so each later batch is
         * one copy into place (no gather of the first, no regrowth). */
        uint64_t total = 0;
        mr_dataset *ds = NULL;
        if (!s3 && mr_dataset_open(path, &ds, NULL) == MR_OK) total = mr_dataset_n_rows(ds);
        mr_dataset_close(ds);
        mr_status rc = mr_source_open(path, MR_SRC_AUTO, NULL, &src, err);
        while (rc == MR_OK) {
            rc = mr_source_next(src, 0, &batch, err);
            if (rc != MR_OK || !batch) break;
            if (!all) {
                all = batch;
                batch = NULL;
                for (size_t i = 0; total > all->n_rows && i < all->n_cols; i++)
                    (void)mr_column_reserve(all->cols[i], (size_t)total); /* a hint: appends still grow */
                continue;
            }
            rc = mr_table_append(all, batch, err);
            mr_table_free(batch);
            batch = NULL;
        }
        mr_source_close(src, NULL);
        if (rc == MR_OK && !all) rc = mr_table_new(&all, err);
        if (rc != MR_OK) {
            mr_table_free(all);
            return rc;
        }
        *out = all;
        return MR_OK;
    }
    if (ends_with(path, ".parquet") || ends_with(path, ".pq")) {
        mr_parquet_file *f = NULL;
        mr_status rc = mr_parquet_open(path, &f, err);
        if (rc == MR_OK) rc = mr_parquet_read_all(f, NULL, 0, out, err);
        mr_parquet_close(f);
        return rc;
    }
    if (ends_with(path, ".jsonl") || ends_with(path, ".ndjson")) {
        mr_jsonl_options o;
        memset(&o, 0, sizeof(o));
        return mr_jsonl_read(path, &o, out, NULL, err);
    }
    if (ends_with(path, ".csv") || ends_with(path, ".tsv") || ends_with(path, ".txt")) {
        mr_csv_options o;
        memset(&o, 0, sizeof(o));
        if (ends_with(path, ".tsv")) o.delimiter = '\t';
        return mr_csv_read(path, &o, out, NULL, err);
    }
    mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: unknown file type", path);
    mr_error_hint(err, "name it .csv, .tsv, .jsonl, .ndjson or .parquet");
    return rc;
}

mr_status mr_table_write_file(const char *path, const mr_table *t, mr_error *err)
{
    if (ends_with(path, ".parquet") || ends_with(path, ".pq")) {
        char *tmp = mr_asprintf("%s.tmp.%ld", path, (long)getpid());
        if (!tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_parquet_write_opts o;
        mr_parquet_write_opts_init(&o);
        mr_status rc = mr_parquet_write_table(tmp, t, &o, err);
        if (rc == MR_OK) rc = mr_fs_fsync_path(tmp, err);
        if (rc == MR_OK && rename(tmp, path) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rename into place", path);
        if (rc != MR_OK) unlink(tmp);
        mr_free(tmp);
        return rc;
    }
    if (ends_with(path, ".csv") || ends_with(path, ".txt")) return mr_csv_write_table(path, t, ',', err);
    if (ends_with(path, ".tsv")) return mr_csv_write_table(path, t, '\t', err);
    mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: unknown output type", path);
    mr_error_hint(err, "name it .csv, .tsv or .parquet");
    return rc;
}
