/* Ingest: any source (mr_source) -> filter -> projection -> dataset writer,
 * one batch at a time, so memory stays bounded by the reader's window and the
 * writer's open row groups. Shared by the `ingest` op and `millrace data
 * ingest`. It does not publish anything: callers write into a private
 * directory and rename it. */
#include "data/dataset_int.h"

#include <string.h>
#include <sys/stat.h>

#define DEFAULT_BATCH_ROWS 131072u

void mr_ingest_opts_init(mr_ingest_opts *o)
{
    memset(o, 0, sizeof *o);
    mr_csv_options_init(&o->csv);
    mr_dataset_write_opts_init(&o->write);
}

/* Bytes of the source files, for readers that do not count what they read
 * (Parquet files, datasets). */
static uint64_t source_bytes(const mr_source *src)
{
    uint64_t total = 0;
    for (size_t i = 0; i < mr_source_n_files(src); i++) {
        const char *f = mr_source_file(src, i);
        struct stat st;
        if (mr_fs_is_dir(f)) {
            mr_dataset *ds = NULL;
            if (mr_dataset_open(f, &ds, NULL) != MR_OK) continue;
            for (size_t k = 0; k < mr_dataset_n_shards(ds); k++) {
                mr_dataset_shard_info si;
                mr_dataset_shard(ds, k, &si);
                total += si.bytes;
            }
            mr_dataset_close(ds);
        } else if (stat(f, &st) == 0) {
            total += (uint64_t)st.st_size;
        }
    }
    return total;
}

/* Keeps the rows of *t where the filter is TRUE (*t may be replaced). */
static mr_status apply_filter(const mr_expr *e, mr_table **t, uint64_t *n_filtered, mr_error *err)
{
    mr_table *in = *t;
    size_t n = in->n_rows;
    uint8_t *mask = mr_malloc(n ? n : 1);
    uint32_t *idx = mr_malloc((n ? n : 1) * sizeof *idx);
    mr_status rc = MR_OK;
    if (!mask || !idx) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    rc = mr_expr_eval_filter(e, in, mask, err);
    if (rc != MR_OK) goto done;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        idx[m] = (uint32_t)i;
        m += mask[i] != 0;
    }
    *n_filtered += n - m;
    if (m == n) goto done;
    mr_table *out = NULL;
    rc = mr_table_take(in, idx, m, &out, err);
    if (rc != MR_OK) goto done;
    mr_table_free(in);
    *t = out;
done:
    mr_free(mask);
    mr_free(idx);
    return rc;
}

mr_status mr_dataset_ingest(const char *source, const char *dir, const mr_ingest_opts *o, mr_ingest_stats *stats,
                            mr_error *err)
{
    mr_ingest_opts defaults;
    if (!o) {
        mr_ingest_opts_init(&defaults);
        o = &defaults;
    }
    mr_ingest_stats st;
    memset(&st, 0, sizeof st);
    mr_source *src = NULL;
    mr_dataset_writer *w = NULL;
    mr_expr *filter = NULL;
    mr_table *t = NULL;
    uint64_t good = 0; /* good source rows taken */
    size_t batch_rows = o->batch_rows ? o->batch_rows : DEFAULT_BATCH_ROWS;
    int first = 1;
    mr_status rc = mr_source_open(source, o->format, &o->csv, &src, err);
    if (rc != MR_OK) goto done;
    st.files = mr_source_n_files(src);
    if (o->filter && o->filter[0]) {
        rc = mr_expr_parse(o->filter, strlen(o->filter), "filter", &filter, err);
        if (rc != MR_OK) goto done;
    }
    rc = mr_dataset_writer_open(dir, &o->write, &w, err);
    if (rc != MR_OK) goto done;
    for (;;) {
        size_t want = batch_rows;
        if (o->max_rows) {
            if (good >= o->max_rows) break;
            if (o->max_rows - good < want) want = (size_t)(o->max_rows - good);
        }
        rc = mr_source_next(src, want, &t, err);
        if (rc != MR_OK || !t) break;
        if (o->max_rows && t->n_rows > o->max_rows - good) { /* a reader may return more than asked */
            mr_table *head = NULL;
            rc = mr_table_slice(t, 0, (size_t)(o->max_rows - good), &head, err);
            if (rc != MR_OK) break;
            mr_table_free(t);
            t = head;
        }
        good += t->n_rows;
        if (first && filter) {
            rc = mr_expr_bind_table(filter, t, MR_EXPR_FILTER, err);
            if (rc != MR_OK) break;
        }
        first = 0;
        if (filter) {
            rc = apply_filter(filter, &t, &st.rows_filtered, err);
            if (rc != MR_OK) break;
        }
        if (o->columns) {
            rc = mr_table_project(t, o->columns, o->n_columns, err);
            if (rc != MR_OK) {
                mr_error_hint(err, "the source has no such column");
                break;
            }
        }
        rc = mr_dataset_writer_write(w, t, err);
        if (rc != MR_OK) break;
        st.rows_written += t->n_rows;
        mr_table_free(t);
        t = NULL;
        st.rows_read = good;
        if (o->progress) o->progress(o->progress_ctx, &st);
    }
    if (rc != MR_OK) goto done;
    rc = mr_dataset_writer_close(w, &st.dataset, err);
    w = NULL;
done:
    mr_table_free(t);
    mr_dataset_writer_free(w);
    mr_expr_free(filter);
    if (src) {
        mr_csv_stats cs;
        uint64_t whole = source_bytes(src);
        mr_source_close(src, &cs);
        st.rows_skipped = cs.rows_skipped;
        st.rows_quarantined = cs.rows_quarantined;
        st.bytes_read = cs.bytes ? cs.bytes : whole;
    }
    st.rows_read = good + st.rows_skipped;
    if (stats) *stats = st;
    return rc;
}
