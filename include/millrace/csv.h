/* CSV reader (RFC 4180): parallel chunked parsing into mr_table, type
 * inference or declared schema, errors naming file, line and field.
 *
 * Example:
 *
 *   mr_csv_options o;
 *   mr_csv_options_init(&o);                 // or a zeroed struct: same defaults
 *   const char *names[] = {"age"};
 *   mr_dtype types[] = {MR_T_INT64};
 *   o.schema_names = names; o.schema_types = types; o.n_schema = 1;
 *   mr_table *t = NULL;
 *   mr_csv_stats st;
 *   if (mr_csv_read("train.csv", &o, &t, &st, &err) != MR_OK)
 *       mr_log_error(&err);  // "train.csv:1042:3: column 'age' (field 3): expected int64, got "?""
 *   else
 *       printf("%llu rows, %zu columns\n", (unsigned long long)st.rows_read, t->n_cols);
 *   mr_table_free(t);
 *
 * Example, streaming in bounded memory (for ingest writing shards):
 *
 *   mr_csv_options o;
 *   mr_csv_options_init(&o);
 *   mr_csv_reader *r;
 *   if (mr_csv_reader_open("big.csv", &o, &r, &err) != MR_OK) { mr_log_error(&err); return; }
 *   mr_table *batch;
 *   while (mr_csv_reader_next(r, 100000, &batch, &err) == MR_OK && batch) {
 *       // ... write batch ...
 *       mr_table_free(batch);
 *   }
 *   mr_csv_stats st;
 *   mr_csv_reader_close(r, &st);
 *   if (mr_error_is_set(&err)) mr_log_error(&err);
 *
 * Rules (see docs/data.md, "CSV and JSON lines"):
 * - Records end at LF or CRLF outside quotes; a lone CR is data. A UTF-8 BOM
 *   is skipped; blank lines are skipped; the final newline is optional.
 * - Fields are never trimmed. A quoted field may hold delimiters, newlines and
 *   doubled quotes. A quote inside an unquoted field, or anything but a
 *   delimiter or line end after a closing quote, makes the row bad.
 * - Null: an unquoted field that is empty or equals a null token (by default
 *   pandas' na_values and "-": mr_csv_default_null_tokens). A quoted field is
 *   a value: "" is the empty string in a string column and null in any other
 *   column; "NA" is the string NA.
 * - Inference (first sample_rows records): bool (true/false, any case),
 *   int64, float64 (also nan/inf), date (YYYY-MM-DD), timestamp (ISO 8601),
 *   else string. mr_csv_read promotes an inferred column when later values
 *   do not fit (int64 -> float64, date -> timestamp, anything else -> string)
 *   and re-parses it; the streaming reader cannot change a schema it has
 *   already emitted, so there a misfit is MR_E_SCHEMA (declare the type or
 *   raise sample_rows), and a column that is all null in the sample is string.
 * - A column inferred (or promoted) to string although more than 90% of its
 *   non-null values are numbers gets a warning through mr_log naming
 *   file:line:field of the first value that is not a number, e.g.
 *   events.csv:1042:7: column 'age' was read as string: 4,999 of 5,000
 *   values are numbers; the first that is not is "?" (...). Declared columns
 *   never warn.
 * - A declared type never changes: a value that does not fit is a bad row.
 * - Bad rows (wrong field count, declared-type misfit, quoting error, field or
 *   line over the caps): on_error FAIL stops with MR_E_PARSE (MR_E_LIMIT for
 *   caps) naming file:line:field; SKIP drops and counts them; QUARANTINE also
 *   appends their original bytes to quarantine_path.
 * - Results (table, errors, stats) do not depend on the thread count: chunk
 *   boundaries depend only on chunk_size and the data.
 * - STRING columns with few distinct values (<= rows/2 and <= 65536) come back
 *   dictionary-encoded (mr_column.codes/dict), others plain.
 *
 * Ownership: tables returned (mr_csv_read, each batch of the reader) are
 * the caller's (mr_table_free); a reader is ended with mr_csv_reader_close
 * and a writer with mr_csv_writer_close or mr_csv_writer_free. Options are
 * read during open and copied (null tokens, schema names, paths): nothing
 * in them is kept. Column names of a reader are borrowed until close.
 * Status codes: MR_E_IO (open, read, write; errno kept), MR_E_PARSE (a bad
 * row with on_error FAIL; an empty file that should have a header),
 * MR_E_LIMIT (a line or field over its cap, a column over the table caps),
 * MR_E_SCHEMA (a declared column that is absent, duplicate header names; a
 * streaming misfit), MR_E_INVALID_ARG (bad options), MR_E_STATE (a writer
 * used after a failure), MR_E_NOMEM. Messages name file:line:field.
 * Thread safety: one reader or writer per thread; mr_csv_read may run
 * concurrently with other reads (all share the core pool; do not call it
 * from inside an mr_parallel_for job). */
#ifndef MILLRACE_CSV_H
#define MILLRACE_CSV_H

/* The version of what reading a CSV file means (null tokens, inference):
 * bumped whenever the same bytes may read as a different table. A stage of
 * a built-in op that reads a CSV file has it in its cache key (docs/engine.md
 * "Cache keys"), so results read under other rules are never reused.
 * 2: pandas' missing-value tokens are null (2026-12). */
#define MR_CSV_READER_VERSION 2

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
    const char *const *null_tokens;  /* NULL = mr_csv_default_null_tokens; the empty field is always null */
    size_t n_null_tokens;
    const char *const *schema_names; /* declared types by column name (borrowed during open) */
    const mr_dtype *schema_types;
    const mr_colkind *schema_kinds;  /* optional, parallel to schema_types (NULL: plain): int8..uint64 (a
                                        value out of range misfits), decimal(p,s) (exact: more fractional
                                        digits than s misfit), binary, timestamp_local */
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

void mr_csv_options_init(mr_csv_options *o); /* zeroes o: every default above */

/* The null tokens used when mr_csv_options.null_tokens is NULL: pandas'
 * default na_values ("#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN",
 * "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A", "NA", "NULL", "NaN",
 * "None", "n/a", "nan", "null") and "-". Static storage; *n_out gets the
 * count. Thread-safe. */
const char *const *mr_csv_default_null_tokens(size_t *n_out);

/* Reads the whole file into one table.
 * [in]  path, o (NULL = defaults)
 * [out] *out: a new table the caller frees; stats (may be NULL)
 * Returns MR_E_IO (open/read), MR_E_PARSE (bad row, empty file with header),
 * MR_E_LIMIT (caps), MR_E_SCHEMA (schema names an absent column, duplicate
 * header names), MR_E_INVALID_ARG (options), MR_E_NOMEM. */
mr_status mr_csv_read(const char *path, const mr_csv_options *o, mr_table **out, mr_csv_stats *stats, mr_error *err);

typedef struct mr_csv_reader mr_csv_reader;

/* Opens path, reads the header and infers the schema from the first
 * sample_rows records (o NULL = defaults). Errors as mr_csv_read. The
 * reader is the caller's (mr_csv_reader_close). */
mr_status mr_csv_reader_open(const char *path, const mr_csv_options *o, mr_csv_reader **out, mr_error *err);
/* Column names and types of every batch (borrowed, valid until close);
 * NULL / MR_T_NULL for j past the end. */
size_t mr_csv_reader_n_cols(const mr_csv_reader *r);
const char *mr_csv_reader_col_name(const mr_csv_reader *r, size_t j);
/* The index of the column named name, or -1; O(1) expected (the header's
 * names are hashed once at open). */
ssize_t mr_csv_reader_col_index(const mr_csv_reader *r, const char *name);
mr_dtype mr_csv_reader_col_type(const mr_csv_reader *r, size_t j);
/* Next batch of 1..max_rows rows (0 = no limit) in file order; a batch may
 * also end at an internal window boundary (about 8 chunks). *out = NULL at
 * the end; a file with no data rows (or none kept) first gives one batch of
 * 0 rows with the header's columns. The caller frees each batch. After an error the reader is sticky:
 * later calls return the same status (and copy the same error into err). */
mr_status mr_csv_reader_next(mr_csv_reader *r, size_t max_rows, mr_table **out, mr_error *err);
/* Closes the file (and quarantine file); fills stats if not NULL. NULL is a no-op. */
void mr_csv_reader_close(mr_csv_reader *r, mr_csv_stats *stats);

/* ---- writing ----------------------------------------------------------------
 * The one CSV writer: every CSV millrace writes goes through it, so two
 * exports of one table are the same bytes, and what it writes reads back
 * (mr_csv_read with default options) as the same values:
 * - a header record of the column names, then one record per row, LF ends;
 * - a null is an empty unquoted field; an empty string is "" (in a table of
 *   one column, where an empty record would be skipped as a blank line, a
 *   null is "" in a non-string column, which reads back as null, and NA in a
 *   string column);
 * - a field is quoted when it is empty, holds the delimiter, a quote, CR or
 *   LF, begins with a UTF-8 BOM, or equals a default null token
 *   (mr_csv_default_null_tokens), so the
 *   string "NA" and the float NaN (printed nan) are not read back as null;
 *   a quote inside is doubled (RFC 4180);
 * - values are printed by mr_column_format (shortest round-trip floats,
 *   YYYY-MM-DD dates, "YYYY-MM-DD HH:MM:SS[.ffffff]" timestamps).
 *
 * Example (given const mr_table *batch):
 *
 *   mr_csv_writer *w;
 *   if (mr_csv_writer_open("out.csv", ',', &w, &err) != MR_OK) { mr_log_error(&err); return; }
 *   if (mr_csv_writer_write(w, batch, &err) != MR_OK) {   // as many batches as you like
 *       mr_csv_writer_free(w);                              // nothing appears at out.csv
 *       mr_log_error(&err);
 *       return;
 *   }
 *   if (mr_csv_writer_close(w, &err) != MR_OK) mr_log_error(&err);   // out.csv appears only now
 */

/* Appends s[0, len) to out as one field, quoted by the rules above (the
 * writer's own rule, for callers that build records themselves). Returns
 * MR_OK or MR_E_NOMEM / MR_E_LIMIT from mr_buf. */
mr_status mr_csv_append_field(mr_buf *out, const char *s, size_t len, char delim);

typedef struct mr_csv_writer mr_csv_writer;

/* Creates PATH.tmp.PID for writing. delim must not be NUL, '"', CR or LF
 * (MR_E_INVALID_ARG). *out is owned by the caller: end it with
 * mr_csv_writer_close (publish) or mr_csv_writer_free (abandon).
 * Errors: MR_E_INVALID_ARG, MR_E_IO (cannot create), MR_E_NOMEM. */
mr_status mr_csv_writer_open(const char *path, char delim, mr_csv_writer **out, mr_error *err);
/* Appends the rows of t (borrowed for the call). The first call writes the
 * header from t's column names (a table of 0 rows writes just the header);
 * later tables must have as many columns (MR_E_SCHEMA). After an error the
 * writer is sticky (MR_E_STATE). Errors: MR_E_IO, MR_E_NOMEM, MR_E_SCHEMA. */
mr_status mr_csv_writer_write(mr_csv_writer *w, const mr_table *t, mr_error *err);
/* Flushes, fsyncs and renames the file to its path, then frees w (always,
 * also on error, when the temporary file is removed). A writer that never
 * wrote publishes an empty file. NULL is a no-op. Errors: MR_E_IO,
 * MR_E_STATE (an earlier write failed). */
mr_status mr_csv_writer_close(mr_csv_writer *w, mr_error *err);
/* Abandons w: closes and removes the temporary file. NULL is a no-op. */
void mr_csv_writer_free(mr_csv_writer *w);

/* Writes t as one CSV file by the rules above, atomically (open, write,
 * close). Errors as the writer's. */
mr_status mr_csv_write_table(const char *path, const mr_table *t, char delim, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
