/* Whole-table reading and writing by file type, for the CLI verbs and ops
 * that take "a data file": CSV (.csv, .tsv), JSON lines (.jsonl, .ndjson),
 * Parquet (.parquet), and datasets (directories with manifest.json).
 *
 * Example:
 *
 *   mr_table *t;
 *   if (mr_table_read_file("train.parquet", &t, &err) != MR_OK) { mr_log_error(&err); return; }
 *   if (mr_table_write_file("scores.csv", t, &err) != MR_OK) mr_log_error(&err);
 *   mr_table_free(t);
 *
 * Ownership: the table read is the caller's (mr_table_free); t is borrowed
 * for the write.
 * Status codes: MR_E_INVALID_ARG (an extension neither function knows,
 * with a hint naming those it does), and those of the reader or writer of
 * the type (csv.h, jsonl.h, parquet.h, dataset.h): MR_E_NOT_FOUND, MR_E_IO,
 * MR_E_PARSE, MR_E_SCHEMA, MR_E_CORRUPT, MR_E_LIMIT, MR_E_NOMEM.
 * Thread safety: reentrant; reads and writes use the core pool (do not call
 * them from inside an mr_parallel_for job). */
#ifndef MILLRACE_IO_H
#define MILLRACE_IO_H

#include "millrace/core.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the whole file into a new table (type by extension, any case:
 * .csv/.txt, .tsv, .jsonl/.ndjson, .parquet/.pq, read with default
 * options); a directory (a millrace dataset, or a folder of data files) or
 * a glob (a path with * ? [) reads them all, concatenated in name order.
 * An s3:// URL reads what mr_source_open finds there (dataset.h). */
mr_status mr_table_read_file(const char *path, mr_table **out, mr_error *err);
/* Writes a table, atomically (path appears complete or not at all):
 * .csv/.txt, .tsv (mr_csv_write_table) or .parquet/.pq (zstd). */
mr_status mr_table_write_file(const char *path, const mr_table *t, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
