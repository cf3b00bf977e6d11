/* WebDataset shards: tar files in which a sample is the run of consecutive
 * members sharing a key, one member per field (libarchive).
 *
 * A member "dir/000123.jpg" has the key "dir/000123" (its path up to the
 * first dot of its last component) and the extension "jpg" (the rest,
 * "seg.png" for "x.seg.png"). Read as a table, a tar gives one row per
 * sample: `__key__`, then one column per extension found in the tar, sorted
 * by name; a sample without that member has null there. The columns are
 * binary, except the extensions WebDataset uses for text (txt, text, cls,
 * cls2, json, caption, label, id, index), which are strings. Members that are
 * not regular files, or whose name has no extension, are skipped.
 *
 * Written, a table gives a tar of the same shape: the key is the `__key__`
 * column, else the `path` column without its extension (further dots of the
 * name become '_'), else the row number (9 digits); every other column is
 * one member per non-null value: strings and bytes as they are, other
 * values as text (mr_column_format). Entries carry no owner and time 0, so
 * the same table gives the same bytes; names are stored as their bytes (pax
 * hdrcharset=BINARY), so a key that is not UTF-8 writes back. Readers from the webdataset package,
 * GNU tar, Python's tarfile read it.
 *
 * Example (given const mr_table *samples):
 *
 *   mr_wds_reader *r;
 *   if (mr_wds_open("shard-000000.tar", &r, &err) != MR_OK) { mr_log_error(&err); return; }
 *   mr_table *t;
 *   while (mr_wds_next(r, 4096, &t, &err) == MR_OK && t) mr_table_free(t);   // a batch of samples
 *   mr_wds_close(r);
 *   mr_wds_writer *w;
 *   if (mr_wds_writer_open("out-000000.tar", &w, &err) != MR_OK) { mr_log_error(&err); return; }
 *   if (mr_wds_writer_write(w, samples, &err) != MR_OK) { mr_wds_writer_free(w); mr_log_error(&err); return; }
 *   if (mr_wds_writer_close(w, NULL, &err) != MR_OK) mr_log_error(&err);
 */
#ifndef MILLRACE_WEBDATASET_H
#define MILLRACE_WEBDATASET_H

#include "millrace/core.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_wds_reader mr_wds_reader;

/* Opens a tar (optionally gzip, zstd, xz or bzip2 compressed) and lists its
 * members once for the columns. MR_E_NOT_FOUND, MR_E_IO, MR_E_CORRUPT (not
 * a tar: named with the member's position; a member whose extension is not valid UTF-8,
 * which could not name a column), MR_E_NOMEM. */
mr_status mr_wds_open(const char *path, mr_wds_reader **out, mr_error *err);
/* The next samples, at most max_rows (0 = 65,536) and about 64 MiB of
 * values; *out NULL at the end. MR_E_CORRUPT (a member given twice in one
 * sample, a truncated tar: both named), MR_E_LIMIT (a member over 2 GiB). */
mr_status mr_wds_next(mr_wds_reader *r, size_t max_rows, mr_table **out, mr_error *err);
void mr_wds_close(mr_wds_reader *r); /* NULL is a no-op */

typedef struct mr_wds_writer mr_wds_writer;
/* Starts the tar at path (written as path.tmp.PID, renamed at close). */
mr_status mr_wds_writer_open(const char *path, mr_wds_writer **out, mr_error *err);
/* Appends batch's rows as samples. The first batch fixes the key column.
 * MR_E_INVALID_ARG: a column name that cannot be an extension (empty, or
 * with '/'), a null or empty key. */
mr_status mr_wds_writer_write(mr_wds_writer *w, const mr_table *batch, mr_error *err);
/* Finishes and publishes the tar; the writer is freed either way.
 * samples (may be NULL) gets the rows written. */
mr_status mr_wds_writer_close(mr_wds_writer *w, uint64_t *samples, mr_error *err);
void mr_wds_writer_free(mr_wds_writer *w); /* abandons it: nothing is published */

#ifdef __cplusplus
}
#endif
#endif
