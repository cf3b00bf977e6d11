/* JSON-lines reader: one flat JSON object per line into an mr_table.
 *
 * Example:
 *
 *   mr_jsonl_options o;
 *   mr_jsonl_options_init(&o);
 *   mr_table *t = NULL;
 *   if (mr_jsonl_read("events.jsonl", &o, &t, NULL, &err) != MR_OK)
 *       mr_log_error(&err);  // "events.jsonl:17: column 'age': expected int64, got "n/a""
 *   mr_table_free(t);
 *
 * Rules (see docs/data.md, "CSV and JSON lines"):
 * - Columns are the union of the keys of all lines, in order of first
 *   appearance; a missing key or JSON null is null. Blank lines are skipped.
 * - Types come from the whole file (no sampling is needed: every line is
 *   parsed anyway): true/false -> bool, integers -> int64, reals (or a mix of
 *   integers and reals) -> float64, strings -> date / timestamp when every
 *   value parses as one, else string. Mixed kinds -> string, holding the
 *   compact JSON text of the non-string values (5, true, 1.5).
 * - Nested objects and arrays are kept as their compact JSON text in a string
 *   column (not an error), so nothing in the input is lost.
 * - A declared type (schema) never changes; a JSON string that parses as the
 *   declared type is accepted ("42" for int64); anything else is a bad row.
 * - Bad rows (invalid JSON, not an object, declared-type misfit, line longer
 *   than max_line_len) follow on_error exactly as in the CSV reader, and
 *   results never depend on the thread count.
 * Parsing uses jansson; the whole file is read into memory first.
 *
 * Ownership: the table is the caller's (mr_table_free); options are read
 * during the call only.
 * Status codes: MR_E_NOT_FOUND (no such file), MR_E_IO, MR_E_PARSE (a bad
 * row with on_error FAIL, naming file:line), MR_E_LIMIT (a line over
 * max_line_len), MR_E_SCHEMA (the schema names a key no line has),
 * MR_E_INVALID_ARG (bad options), MR_E_NOMEM.
 * Thread safety: reentrant; runs on the core pool (do not call it from
 * inside an mr_parallel_for job). */
#ifndef MILLRACE_JSONL_H
#define MILLRACE_JSONL_H

#include "millrace/csv.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_jsonl_options {
    const char *const *schema_names; /* declared types by key */
    const mr_dtype *schema_types;
    const mr_colkind *schema_kinds;  /* optional, as in mr_csv_options (a JSON number fits a decimal when
                                        it is the double nearest a value of that scale) */
    size_t n_schema;
    mr_on_error on_error;
    const char *quarantine_path;     /* required with MR_ON_ERROR_QUARANTINE */
    int threads;                     /* 0 = core pool size */
    size_t max_line_len;             /* 0 = 16 MiB */
    size_t chunk_size;               /* 0 = 8 MiB (small values are for tests) */
} mr_jsonl_options;

void mr_jsonl_options_init(mr_jsonl_options *o); /* zeroes: the defaults above */

/* Reads the whole file into one table (o NULL = defaults; stats may be
 * NULL; the same counters as CSV). Errors as above; *out is NULL on
 * failure. The caller frees *out. */
mr_status mr_jsonl_read(const char *path, const mr_jsonl_options *o, mr_table **out, mr_csv_stats *stats,
                        mr_error *err);
/* The same over text in memory, buf[0, len) (borrowed for the call): the
 * lines of a file from line first_line on (a reader of a big file in
 * windows of whole lines), so errors name the file (name) and the line as
 * mr_jsonl_read would; a BOM is skipped only at line 1. Columns and types
 * come from these lines alone. */
mr_status mr_jsonl_read_mem(const char *buf, size_t len, const char *name, long first_line,
                            const mr_jsonl_options *o, mr_table **out, mr_csv_stats *stats, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
