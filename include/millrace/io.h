/* Whole-table reading and writing by file type, for the CLI verbs and ops
 * that take "a data file": CSV (.csv, .tsv), JSON lines (.jsonl, .ndjson),
 * Parquet (.parquet), and datasets (directories with manifest.json).
 *
 *   mr_table *t;
 *   mr_table_read_file("train.parquet", &t, &err);
 *   mr_table_write_file("scores.csv", t, &err);
 */
#ifndef MILLRACE_IO_H
#define MILLRACE_IO_H

#include "millrace/core.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Reads the whole file into a table (type by extension); a directory (a
 * millrace dataset, or a folder of data files) or a glob reads them all. */
mr_status mr_table_read_file(const char *path, mr_table **out, mr_error *err);
/* Writes a table, atomically: .csv/.tsv or .parquet (zstd). */
mr_status mr_table_write_file(const char *path, const mr_table *t, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
