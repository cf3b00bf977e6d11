/* CSV reader (RFC 4180): parallel chunked parsing into mr_table, type
 * inference or declared schema, errors naming file, line and field.
 *
 *   mr_csv_options o;
 *   mr_csv_options_init(&o);                 // or a zeroed struct: same defaults
 *   const char *names[] = {"age"};
 *   mr_dtype types[] = {MR_T_INT64};
 *   o.schema_names = names; o.schema_types = types; o.n_schema = 1;
 *   mr_table *t = NULL;
 *   mr_csv_stats st;
 *   if (mr_csv_read("train.csv", &o, &t, &st, &err) != MR_OK)
 *       mr_log_error(&err);  // "train.csv:1042:3: column 'age' (field 3): expected int64, got "n/a""
 *   mr_table_free(t);
 *
 * Streaming (bounded memory, for ingest writing shards):
 *
 *   mr_csv_reader *r;
 *   mr_csv_reader_open("big.csv", &o, &r, &err);
 *   mr_table *batch;
 *   while (mr_csv_reader_next(r, 100000, &batch, &err) == MR_OK && batch) {
 *       ...write batch...
 *       mr_table_free(batch);
 *   }
 *   mr_csv_reader_close(r, &st);
 *
 * Rules (see docs/data.md, "CSV and JSON lines"):
 * - Records end at LF or CRLF outside quotes; a lone CR is data. A UTF-8 BOM
 *   is skipped; blank lines are skipped; the final newline is optional.
 * - Fields are never trimmed. A quoted field may hold delimiters, newlines and
 *   doubled quotes. A quote inside an unquoted field, or anything but a
 *   delimiter or line end after a closing quote, makes the row bad.
 * - Null: an unquoted field that is empty or equals a null token ("NA",
 *   "NULL", "null" by default). A quoted field is a value: "" is the empty
 *   string in a string column and null in any other column.
 * - Inference (first sample_rows records): bool (true/false, any case),
 *   int64, float64 (also nan/inf), date (YYYY-MM-DD), timestamp (ISO 8601),
 *   else string. mr_csv_read promotes an inferred column when later values
 *   do not fit (int64 -> float64, date -> timestamp, anything else -> string)
 *   and re-parses it; the streaming reader cannot change a schema it has
 *   already emitted, so there a misfit is MR_E_SCHEMA (declare the type or
 *   raise sample_rows), and a column that is all null in the sample is string.
 * - A declared type never changes: a value that does not fit is a bad row.
 * - Bad rows (wrong field count, declared-type misfit, quoting error, field or
 *   line over the caps): on_error FAIL stops with MR_E_PARSE (MR_E_LIMIT for
 *   caps) naming file:line:field; SKIP drops and counts them; QUARANTINE also
 *   appends their original bytes to quarantine_path.
 * - Results (table, errors, stats) do not depend on the thread count: chunk
 *   boundaries depend only on chunk_size and the data.
 * - STRING columns with few distinct values (<= rows/2 and <= 65536) come back
 *   dictionary-encoded (mr_column.codes/dict), others plain.
 * Thread safety: one reader per thread; mr_csv_read may run concurrently with
 * other reads (all share the core pool). */
#ifndef MILLRACE_CSV_H
#define MILLRACE_CSV_H

#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_on_error {
    MR_ON_ERROR_FAIL = 0,       /* first bad row (in file order) is the error */
    MR_ON_ERROR_SKIP = 1,       /* bad rows are dropped and counted */
    MR_ON_ERROR_QUARANTINE = 2, /* ... and their original bytes appended to quarantine_path */
} mr_on_error;

typedef struct mr_csv_options {
    char delimiter;                  /* 0 = ','; must not be CR, LF or the quote */
    char quote;                      /* 0 = '"' */
    int no_header;                   /* 0: first record names the columns; 1: columns c0, c1, ... */
    const char *const *null_tokens;  /* NULL = {"NA", "NULL", "null"}; the empty field is always null */
    size_t n_null_tokens;
    const char *const *schema_names; /* declared types by column name (borrowed during open) */
    const mr_dtype *schema_types;
    size_t n_schema;
    size_t sample_rows;              /* records used for inference; 0 = 10000 */
    mr_on_error on_error;
    const char *quarantine_path;     /* required with MR_ON_ERROR_QUARANTINE; truncated at open */
    int threads;                     /* 0 = core pool size; 1 = serial */
    size_t max_line_len;             /* bytes per record; 0 = 16 MiB */
    size_t max_field_len;            /* bytes per field; 0 = 16 MiB */
    size_t chunk_size;               /* parse unit in bytes; 0 = 8 MiB (small values are for tests) */
} mr_csv_options;

typedef struct mr_csv_stats {
    uint64_t rows_read;        /* rows returned */
    uint64_t rows_skipped;     /* bad rows dropped (SKIP and QUARANTINE) */
    uint64_t rows_quarantined; /* bad rows written to the quarantine file */
    uint64_t bytes;            /* input bytes consumed */
} mr_csv_stats;

void mr_csv_options_init(mr_csv_options *o);

/* Reads the whole file into one table.
 * [in]  path, o (NULL = defaults)
 * [out] *out: a new table the caller frees; stats (may be NULL)
 * Returns MR_E_IO (open/read), MR_E_PARSE (bad row, empty file with header),
 * MR_E_LIMIT (caps), MR_E_SCHEMA (schema names an absent column, duplicate
 * header names), MR_E_INVALID_ARG (options), MR_E_NOMEM. */
mr_status mr_csv_read(const char *path, const mr_csv_options *o, mr_table **out, mr_csv_stats *stats, mr_error *err);

typedef struct mr_csv_reader mr_csv_reader;

/* Opens path, reads the header and infers the schema from the first
 * sample_rows records. Errors as mr_csv_read. */
mr_status mr_csv_reader_open(const char *path, const mr_csv_options *o, mr_csv_reader **out, mr_error *err);
/* Column names and types of every batch (borrowed, valid until close). */
size_t mr_csv_reader_n_cols(const mr_csv_reader *r);
const char *mr_csv_reader_col_name(const mr_csv_reader *r, size_t j);
mr_dtype mr_csv_reader_col_type(const mr_csv_reader *r, size_t j);
/* Next batch of 1..max_rows rows (0 = no limit) in file order; a batch may
 * also end at an internal window boundary (about 8 chunks). *out = NULL at
 * the end. The caller frees each batch. After an error the reader is sticky:
 * later calls return the same status. */
mr_status mr_csv_reader_next(mr_csv_reader *r, size_t max_rows, mr_table **out, mr_error *err);
/* Closes the file (and quarantine file); fills stats if not NULL. NULL is a no-op. */
void mr_csv_reader_close(mr_csv_reader *r, mr_csv_stats *stats);

/* Writes t as CSV with a header (RFC 4180 quoting, nulls as empty fields,
 * values as mr_column_format prints them), atomically (temp file + rename). */
mr_status mr_csv_write_table(const char *path, const mr_table *t, char delim, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
