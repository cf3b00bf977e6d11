/* Datasets: a directory of Parquet shards (optionally hive-partitioned
 * `key=value/` directories) plus manifest.json, written as rows stream in and
 * scanned with filter push-down (partition pruning, then shard and row-group
 * skipping by min/max statistics, then row filtering). Also a helper that
 * opens any supported source (CSV, TSV, JSON lines, Parquet, a dataset or a
 * directory/glob of such files) as a stream of batches, for ingest.
 *
 * Example (given const mr_table *batch):
 *
 *   mr_dataset_write_opts o;
 *   mr_dataset_write_opts_init(&o);          // zstd, 1M rows/shard, 128Ki-row row groups
 *   const char *parts[] = {"day"};
 *   o.partition_by = parts; o.n_partition_by = 1;
 *   mr_dataset_writer *w;
 *   if (mr_dataset_writer_open("out", &o, &w, &err) != MR_OK) { mr_log_error(&err); return; }
 *   if (mr_dataset_writer_write(w, batch, &err) != MR_OK) {   // as many batches as you like
 *       mr_dataset_writer_free(w);
 *       mr_log_error(&err);
 *       return;
 *   }
 *   mr_dataset_summary sum;
 *   if (mr_dataset_writer_close(w, &sum, &err) != MR_OK) { mr_log_error(&err); return; }   // out/manifest.json last
 *
 *   mr_table *t;
 *   const char *cols[] = {"user", "amount"};
 *   mr_dataset_explain ex;
 *   if (mr_dataset_read_all("out", "day >= DATE '2024-03-01'", cols, 2, &t, &ex, &err) == MR_OK) {
 *       printf("%zu rows, %llu shards pruned\n", t->n_rows, (unsigned long long)ex.shards_pruned_stats);
 *       mr_table_free(t);
 *   }
 *
 * The on-disk format is specified in docs/data.md ("Datasets").
 *
 * Ownership: a dataset, writer, scan and source are the caller's, each
 * ended by its _close (or mr_dataset_writer_free); every batch and table
 * returned is the caller's (mr_table_free). Accessors return views
 * borrowed from the dataset (names, shard paths and hashes, statistics),
 * valid until mr_dataset_close. Options are read during open (the writer
 * and the source copy the names and paths they keep).
 * Status codes: MR_E_NOT_FOUND (no manifest, no matching input, an unknown
 * column), MR_E_CORRUPT (a malformed manifest; a missing, resized or
 * changed shard), MR_E_PARSE / MR_E_SCHEMA (a filter that does not parse or
 * type-check; input files of different schemas; batches that do not match
 * the first), MR_E_INVALID_ARG (bad options, an unknown file extension),
 * MR_E_LIMIT, MR_E_IO, MR_E_STATE (a writer, scan or source used after a
 * failure), MR_E_NOMEM, and the errors of the CSV, JSON-lines and Parquet
 * readers. Messages name the file or shard.
 * Thread safety: an mr_dataset is read-only after open and may be shared by
 * scans and loaders in several threads; a writer, scan or source belongs to
 * one thread at a time. Scans decode on the core pool (do not call them
 * from inside an mr_parallel_for job). */
#ifndef MILLRACE_DATASET_H
#define MILLRACE_DATASET_H

#include "millrace/core.h"
#include "millrace/csv.h"
#include "millrace/parquet.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_DATASET_FORMAT "millrace-dataset/1" /* "format" member of manifest.json */
#define MR_DATASET_MANIFEST "manifest.json"
#define MR_DATASET_MAX_PARTITION_COLS 16
#define MR_DATASET_MAX_OPEN_SHARDS 64 /* partitioned writes: open shard files at once (LRU beyond) */

/* ---- writer ---------------------------------------------------------------- */

typedef struct mr_dataset_write_opts {
    size_t rows_per_shard;            /* 0 = 1,000,000 */
    size_t row_group_rows;            /* 0 = 131,072 */
    size_t row_group_bytes;           /* 0 = 128 MiB: a row group also ends at the row that brings its
                                         values to this many bytes (fixed widths, string and binary
                                         lengths), so rows of multi-megabyte values stay bounded */
    mr_parquet_codec codec;           /* init: MR_PQ_ZSTD (a zeroed struct means uncompressed) */
    int level;                        /* codec level, 0 = default (zstd 1, gzip 6) */
    const char *const *partition_by;  /* column names (borrowed during open), at most 16 */
    size_t n_partition_by;
} mr_dataset_write_opts;

void mr_dataset_write_opts_init(mr_dataset_write_opts *o); /* the defaults above */

typedef struct mr_dataset_summary {
    uint64_t rows;       /* rows written */
    uint64_t shards;     /* shard files */
    uint64_t partitions; /* distinct partitions (1 when not partitioned and rows > 0) */
    uint64_t bytes;      /* bytes of all shard files */
} mr_dataset_summary;

typedef struct mr_dataset_writer mr_dataset_writer;

/* Starts a dataset in dir (created if missing; it should be empty: files
 * named part-NNNNN.parquet and manifest.json are overwritten). opts NULL =
 * defaults. Errors: MR_E_INVALID_ARG (over 16 partition columns, one listed
 * twice), MR_E_IO (cannot create dir), MR_E_NOMEM. The writer is the
 * caller's: end it with mr_dataset_writer_close (publish) or _free. */
mr_status mr_dataset_writer_open(const char *dir, const mr_dataset_write_opts *opts, mr_dataset_writer **out,
                                 mr_error *err);
/* Appends batch's rows (the batch is not modified and stays the caller's).
 * The first batch fixes the schema (names, types, order); later batches must
 * match (MR_E_SCHEMA). Shards are written as rows arrive: memory holds at
 * most one row group per open partition. With partition_by, rows are routed
 * to key=value/ directories by the partition columns' values, and those
 * columns are left out of the shard files (they come back from the manifest
 * on read). MR_E_SCHEMA (another schema; a column of type null),
 * MR_E_NOT_FOUND (a partition column the first batch lacks),
 * MR_E_INVALID_ARG (every column is a partition column), MR_E_LIMIT (a
 * batch over 2^32 - 1 rows), MR_E_IO, MR_E_NOMEM. After an error the writer
 * is sticky-failed (MR_E_STATE). */
mr_status mr_dataset_writer_write(mr_dataset_writer *w, const mr_table *batch, mr_error *err);
/* Flushes and closes every shard, hashes them, and writes manifest.json
 * atomically, last. The writer is freed either way; summary may be NULL.
 * On failure no manifest is written (partial shards stay for the caller to
 * remove with the directory): MR_E_STATE (an earlier write failed), MR_E_IO,
 * MR_E_NOMEM; w NULL is MR_E_INVALID_ARG. */
mr_status mr_dataset_writer_close(mr_dataset_writer *w, mr_dataset_summary *summary, mr_error *err);
/* Abandons a writer without a manifest. NULL is a no-op. */
void mr_dataset_writer_free(mr_dataset_writer *w);

/* Writes t as a whole dataset (open + write + close). Errors as those. */
mr_status mr_dataset_write_table(const char *dir, const mr_table *t, const mr_dataset_write_opts *opts,
                                 mr_dataset_summary *summary, mr_error *err);

/* ---- reader ---------------------------------------------------------------- */

typedef struct mr_dataset mr_dataset;

/* Per-shard, per-column statistics from the manifest. min/max are typed as
 * the column (BOOL: b, INT64/DATE/TIMESTAMP: i, floats: f, STRING: s with
 * bytes owned by the dataset); has_min_max is 0 for all-null columns. */
typedef struct mr_dataset_col_stats {
    int has_min_max;
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *ptr;
            size_t len;
        } s;
    } min, max;
    uint64_t null_count;
    uint64_t nan_count; /* floats: NaN values (not covered by min/max) */
} mr_dataset_col_stats;

typedef struct mr_dataset_shard_info {
    const char *path;          /* relative to the dataset directory */
    uint64_t rows;
    uint64_t bytes;
    uint64_t row_groups;
    const char *hash;          /* 32 hex digits (xxh3-128 of the file) */
    size_t partition;          /* index of its partition (0..mr_dataset_n_partitions-1) */
} mr_dataset_shard_info;

/* Opens dir/manifest.json and validates it: format, schema types, partition
 * columns, shard paths (relative, inside dir), and that every shard exists
 * with the recorded size. Content hashes are checked by mr_dataset_verify.
 * Errors: MR_E_NOT_FOUND (no manifest), MR_E_CORRUPT (malformed manifest; a
 * missing or wrong-sized shard, naming it), MR_E_IO, MR_E_NOMEM. The dataset
 * is the caller's (mr_dataset_close). */
mr_status mr_dataset_open(const char *dir, mr_dataset **out, mr_error *err);
void mr_dataset_close(mr_dataset *ds); /* NULL is a no-op */
/* Hashes every shard and compares with the manifest (MR_E_CORRUPT names the
 * first mismatch; MR_E_NOT_FOUND / MR_E_IO when a shard cannot be read). */
mr_status mr_dataset_verify(const mr_dataset *ds, mr_error *err);
/* Scans and loads of this dataset check Parquet page CRCs only when on (the
 * default is off). A shard's integrity is what the manifest's content hash
 * (mr_dataset_verify) checks, for the whole file;
 * open already checks each shard's size, row and row-group counts. Page
 * CRCs cost a pass over every page read (~5% of a full scan of uncompressed
 * floats), so they are opt-in here; plain Parquet files (mr_parquet_open)
 * keep checking them. Not thread-safe against scans in progress. */
void mr_dataset_set_verify_checksums(mr_dataset *ds, int on);

/* Accessors: pure reads; borrowed pointers valid until close. An index out
 * of range gives NULL / MR_T_NULL / 0 / SIZE_MAX (mr_dataset_partition_col)
 * or a zeroed *out (mr_dataset_shard). */
const char *mr_dataset_dir(const mr_dataset *ds);
size_t mr_dataset_n_cols(const mr_dataset *ds);
const char *mr_dataset_col_name(const mr_dataset *ds, size_t j);
mr_dtype mr_dataset_col_type(const mr_dataset *ds, size_t j);
mr_colkind mr_dataset_col_kind(const mr_dataset *ds, size_t j); /* int widths, binary, naive timestamps */
int mr_dataset_col_nullable(const mr_dataset *ds, size_t j); /* the dataset holds a null in column j */
ssize_t mr_dataset_col_index(const mr_dataset *ds, const char *name); /* -1 if absent */
size_t mr_dataset_n_partition_cols(const mr_dataset *ds);
size_t mr_dataset_partition_col(const mr_dataset *ds, size_t k); /* schema index of partition column k */
uint64_t mr_dataset_n_rows(const mr_dataset *ds);
size_t mr_dataset_n_shards(const mr_dataset *ds);
size_t mr_dataset_n_partitions(const mr_dataset *ds);
void mr_dataset_shard(const mr_dataset *ds, size_t i, mr_dataset_shard_info *out);
/* Statistics of schema column j in shard i (partition columns: min = max =
 * the partition value); NULL for an index out of range. Borrowed. */
const mr_dataset_col_stats *mr_dataset_shard_stats(const mr_dataset *ds, size_t i, size_t j);

/* A dataset on S3 (dir "s3://BUCKET/PREFIX"; the endpoint and credentials
 * as docs/remote.md says) is opened with two requests: one listing
 * of the prefix, which checks every shard's size, and a GET of the manifest.
 * A scan then reads each surviving shard's footer (one ranged GET of its
 * last 64 KiB) and, per surviving row group, only the needed columns'
 * chunks, nearby ranges coalesced (mr_parquet_plan_ranges). Every request
 * is logged, in order (the first 65,536): */
typedef struct mr_dataset_request {
    const char *what;  /* "list", "manifest", "footer", "data", "verify", "file" (a whole object) */
    const char *key;   /* the object or the prefix listed (borrowed until close) */
    uint64_t off, len; /* the range asked; len 0: the whole object, or a listing */
    uint64_t bytes;    /* the response body's bytes */
} mr_dataset_request;
size_t mr_dataset_n_requests(const mr_dataset *ds); /* 0 for a local dataset */
void mr_dataset_request_at(const mr_dataset *ds, size_t i, mr_dataset_request *out);

/* ---- scan ------------------------------------------------------------------ */

/* What a scan skipped and read. Counts fill in as the scan proceeds: the
 * partition and shard steps are decided at open, row groups as they are
 * reached, so after the last batch every field is final. */
typedef struct mr_dataset_explain {
    uint64_t partitions_total, partitions_pruned; /* step 1: partition values */
    uint64_t shards_total;
    uint64_t shards_pruned_partition;             /* shards of pruned partitions */
    uint64_t shards_pruned_stats;                 /* step 2: manifest min/max/null counts */
    uint64_t row_groups_total;                    /* in all shards */
    uint64_t row_groups_pruned_shards;            /* in shards pruned by steps 1-2 */
    uint64_t row_groups_pruned_stats;             /* step 3: Parquet row-group statistics */
    uint64_t row_groups_read;
    uint64_t rows_total;                          /* in the dataset */
    uint64_t rows_scanned;                        /* in row groups read */
    uint64_t rows_selected;                       /* after row filtering */
    uint64_t bytes_total;                         /* all shard files */
    uint64_t bytes_pruned_partition;              /* shard files never opened, step 1 */
    uint64_t bytes_pruned_stats;                  /* step 2 */
    uint64_t bytes_pruned_row_groups;             /* column chunks of row groups skipped in step 3 */
    uint64_t bytes_read;                          /* bytes actually pread from shard files (footers included) */
    uint64_t requests;                            /* a dataset on S3: requests made so far (manifest, listing,
                                                     footers, column chunks); 0 for a local one */
    uint64_t request_bytes;                       /* and the response bodies' bytes */
} mr_dataset_explain;

typedef struct mr_dataset_scan mr_dataset_scan;

/* Starts a scan of ds (borrowed: it must outlive the scan).
 * filter: expression text (docs/expressions.md) or NULL/"" for all rows.
 * columns/n_columns: the output columns in order; NULL = every column.
 * Only the filter's and the output's columns are read from the shards.
 * Errors: MR_E_PARSE / MR_E_SCHEMA / MR_E_NOT_FOUND from the filter (the
 * message names the column; err->hint may say "did you mean"), MR_E_NOT_FOUND
 * for an unknown output column, MR_E_NOMEM. The scan is the caller's
 * (mr_dataset_scan_close). */
mr_status mr_dataset_scan_open(const mr_dataset *ds, const char *filter, const char *const *columns, size_t n_columns,
                               mr_dataset_scan **out, mr_error *err);
/* Next non-empty batch of selected rows (one row group at a time), or *out =
 * NULL at the end. The caller frees each batch. String columns may be
 * dictionary-encoded. Errors: MR_E_IO, MR_E_CORRUPT (a shard, naming it),
 * MR_E_NOMEM; the scan is sticky-failed afterwards (MR_E_STATE). */
mr_status mr_dataset_scan_next(mr_dataset_scan *s, mr_table **out, mr_error *err);
/* Before the first mr_dataset_scan_next: read only shards [lo, hi) (a
 * rank's share of the rows; the others are never opened). */
void mr_dataset_scan_only_shards(mr_dataset_scan *s, size_t lo, size_t hi);
/* The counts so far (see mr_dataset_explain). */
void mr_dataset_scan_explain(const mr_dataset_scan *s, mr_dataset_explain *out);
void mr_dataset_scan_close(mr_dataset_scan *s); /* NULL is a no-op */

/* Appends a human-readable multi-line report of ex to out (MR_E_NOMEM,
 * MR_E_LIMIT). */
mr_status mr_dataset_explain_format(const mr_dataset_explain *ex, mr_buf *out);
/* Appends ex as one JSON object (MR_E_NOMEM, MR_E_LIMIT). */
mr_status mr_dataset_explain_json(const mr_dataset_explain *ex, mr_buf *out);

/* Opens dir, scans it and concatenates the batches into one table (which has
 * the output columns even when no row matches; strings plain). explain may
 * be NULL. Errors: those of mr_dataset_open, _scan_open and _scan_next. */
mr_status mr_dataset_read_all(const char *dir, const char *filter, const char *const *columns, size_t n_columns,
                              mr_table **out, mr_dataset_explain *explain, mr_error *err);

/* ---- any source as batches (for ingest) ------------------------------------ */

typedef enum mr_source_format {
    MR_SRC_AUTO = 0,    /* by extension; directories: a dataset manifest, else the supported files in it */
    MR_SRC_CSV = 1,
    MR_SRC_TSV = 2,     /* CSV with a tab delimiter */
    MR_SRC_JSONL = 3,
    MR_SRC_PARQUET = 4,
    MR_SRC_DATASET = 5, /* a directory with manifest.json */
    MR_SRC_WEBDATASET = 6, /* WebDataset tar shards (.tar, .tar.gz, .tgz, .tar.zst): a row per sample (webdataset.h) */
} mr_source_format;

/* "csv", "tsv", "jsonl" (also "ndjson"), "parquet", "dataset", "auto";
 * MR_E_NOT_FOUND otherwise (no mr_error). */
mr_status mr_source_format_parse(const char *name, mr_source_format *out);

typedef struct mr_source mr_source;

/* Opens path: a file, a directory (a dataset when it holds manifest.json,
 * else every .csv/.tsv/.jsonl/.ndjson/.parquet file in it, sorted by name),
 * or a glob pattern (glob(3), sorted). An s3://BUCKET/KEY URL is the same
 * from one listing: the object KEY, the dataset KEY/ (its manifest), the
 * data files directly under KEY/, or the keys a KEY with * ? [ matches
 * (FNM_PATHNAME), in key order; Parquet objects and datasets are read by
 * ranges (mr_parquet_open_ranged), CSV, JSON-lines and tar objects from a
 * temporary local copy under TMPDIR, removed when the next file opens;
 * messages name the object. csv (NULL = defaults) applies to CSV
 * and TSV files, and its schema/on_error/quarantine/threads fields to JSON
 * lines too. All files must produce the same column names and types
 * (MR_E_SCHEMA names the file that differs). Errors: MR_E_NOT_FOUND (nothing
 * matches), MR_E_INVALID_ARG (unknown extension), MR_E_IO, MR_E_NOMEM;
 * the files are opened (and their errors found) one by one by
 * mr_source_next. csv's strings are copied. The source is the caller's
 * (mr_source_close). */
mr_status mr_source_open(const char *path, mr_source_format format, const mr_csv_options *csv, mr_source **out,
                         mr_error *err);
/* Next batch of 1..max_rows rows (0 = reader's choice), or *out = NULL at the
 * end; a source whose first file has no rows (a Parquet file of empty row
 * groups or none) gives one batch of 0 rows first, with its columns. The
 * caller frees each batch. Errors: the readers' (naming the file),
 * MR_E_SCHEMA (a file whose columns differ from the first's); after one,
 * later calls return MR_E_STATE. */
mr_status mr_source_next(mr_source *src, size_t max_rows, mr_table **out, mr_error *err);
size_t mr_source_n_files(const mr_source *src);
const char *mr_source_file(const mr_source *src, size_t i); /* borrowed until close; NULL past the end */
/* The version of what an s3:// source reads, as its listing saw it: "s3"
 * and the hex xxh3-128 of the bucket and every object's key, size and ETag
 * (the object; the keys a pattern matches; everything under a prefix).
 * Each later read asks for those ETags, so what is read is that version
 * or the read fails (MR_E_STATE, "changed while it was read"). "" for a
 * local source. mr_source_s3_version lists url (one request per 1,000
 * objects) and gives the same id, for cache keys. */
#define MR_S3_VERSION_LEN 35
const char *mr_source_version(const mr_source *src);
mr_status mr_source_s3_version(const char *url, char *id, mr_error *err);
/* An s3:// source's file i: its size as listed (a dataset: its shards',
 * once it has been opened); 0 for local files. */
uint64_t mr_source_object_bytes(const mr_source *src, size_t i);
/* Closes the source; stats (may be NULL) sums the readers' counters. NULL
 * is a no-op. */
void mr_source_close(mr_source *src, mr_csv_stats *stats);


/* ---- ingest: any source -> dataset ------------------------------------------
 * Streams a source (mr_source_open) through an optional row filter and column
 * projection into a dataset writer, batch by batch, in bounded memory.
 *
 * Example:
 *
 *   mr_ingest_opts o;
 *   mr_ingest_opts_init(&o);
 *   o.filter = "country = 'DE'";
 *   mr_ingest_stats st;
 *   if (mr_dataset_ingest("events.csv", "out/events", &o, &st, &err) != MR_OK)
 *       mr_log_error(&err);   // "events.csv:1042:7: ..." (the caller removes out/events)
 *   else
 *       printf("%llu of %llu rows kept\n", (unsigned long long)st.rows_written, (unsigned long long)st.rows_read);
 *
 * Bad source rows follow o.csv.on_error (docs/data.md): FAIL stops with the
 * reader's error (file:line:field, column name and value); SKIP and
 * QUARANTINE count them (QUARANTINE also appends their original bytes to
 * o.csv.quarantine_path, for every input file in turn). Nothing is dropped
 * silently: rows_read = rows_written + rows_filtered + rows_skipped. */
typedef struct mr_ingest_stats {
    uint64_t files;            /* input files */
    uint64_t rows_read;        /* source records consumed: good and bad */
    uint64_t rows_written;     /* rows in the dataset */
    uint64_t rows_filtered;    /* good rows the filter removed */
    uint64_t rows_skipped;     /* bad rows (SKIP or QUARANTINE) */
    uint64_t rows_quarantined; /* bad rows written to the quarantine file */
    uint64_t bytes_read;       /* input bytes consumed (whole files for Parquet and dataset sources) */
    mr_dataset_summary dataset;
} mr_ingest_stats;

typedef struct mr_ingest_opts {
    mr_source_format format;         /* MR_SRC_AUTO: by extension */
    mr_csv_options csv;              /* reader options (schema, delimiter, nulls, on_error, quarantine, threads) */
    const char *filter;              /* expression (docs/expressions.md); NULL or "" = every row */
    const char *const *columns;      /* columns to keep, in this order; NULL = all (the filter may use others) */
    size_t n_columns;
    mr_dataset_write_opts write;     /* shards, row groups, codec, partition_by */
    uint64_t max_rows;               /* 0 = all; else stop after this many good source rows (smoke mode) */
    size_t batch_rows;               /* rows per source batch; 0 = 131,072 */
    /* Called after every batch (may be NULL), with the counts so far. */
    void (*progress)(void *ctx, const mr_ingest_stats *so_far);
    void *progress_ctx;
    const char *s3_version;          /* an s3:// source: the version it must have (mr_source_s3_version: what a
                                        stage's key was computed from), else MR_E_STATE; NULL = any */
} mr_ingest_opts;

void mr_ingest_opts_init(mr_ingest_opts *o); /* defaults: mr_csv_options_init + mr_dataset_write_opts_init */

/* Ingests source (a file, a directory, a dataset or a glob) into the dataset
 * directory dir (created; it should be empty). stats may be NULL and is
 * filled as far as the ingest got, also on failure. On failure no manifest
 * is written: the caller removes dir. Errors: those of mr_source_open/next
 * (MR_E_PARSE naming file:line:field and the column), of the filter
 * (MR_E_PARSE, MR_E_NOT_FOUND with a hint, MR_E_SCHEMA), MR_E_NOT_FOUND for
 * an unknown column in columns or partition_by, writer errors. */
mr_status mr_dataset_ingest(const char *source, const char *dir, const mr_ingest_opts *o, mr_ingest_stats *stats,
                            mr_error *err);

/* ---- files -> dataset: one row per file ----------------------------------------
 * Packs many small files (images, audio clips, documents: the one-file-per-
 * sample layout) into a dataset, one row per file: `path` (relative to the
 * pattern's base directory), the file's bytes in a binary column (`image`
 * unless told) and, when asked, `label` and the other columns of a labels
 * file. The pattern is BASE/REST: BASE is its part before the first path
 * segment with a wildcard (a directory alone: every file under it); REST's
 * segments match one name each (fnmatch: *, ?, [...]; a leading dot only
 * explicitly) and a segment "**" matches any number of directories.
 * Directories are listed and files read on the pool's threads; rows are in
 * the order of their sorted paths, whatever the thread count.
 *
 * Resumable: the dataset is built in the work directory o->work (the CLI
 * uses DIR.partial), as shards of at most o->write.rows_per_shard files and
 * o->write.row_group_bytes bytes, each published in turn; a call that finds
 * the shards of an earlier, killed call of the same file list (paths, sizes,
 * modification times) and options keeps them and continues after them. The
 * result at dir equals an uninterrupted ingest's, byte for byte. A symbolic
 * link to a file is read when it resolves inside BASE and refused otherwise
 * (a path that escapes BASE); symbolic links to directories are not
 * followed. */
typedef enum mr_label_from { MR_LABEL_NONE = 0, MR_LABEL_PARENT_DIR = 1 } mr_label_from;

typedef struct mr_files_opts {
    const char *column;          /* the bytes column; NULL = "image" */
    mr_label_from label_from;    /* MR_LABEL_PARENT_DIR: label = the name of the file's folder */
    const char *labels;          /* CSV/TSV/JSON lines/Parquet file with a `path` column (relative
                                    to BASE) and the label and other columns; NULL = none */
    mr_on_error on_error;        /* FAIL: an unreadable or escaping file stops the ingest (naming it);
                                    SKIP (or QUARANTINE): it is left out, counted and listed */
    mr_dataset_write_opts write; /* shard size (rows_per_shard files, row_group_bytes bytes), codec */
    int shuffle;                 /* 1: rows in a random order fixed by shuffle_seed (Fisher-Yates over the
                                    sorted list), not by path: a loader's block shuffle and bounded buffer
                                    then mix classes that the folders keep together */
    uint64_t shuffle_seed;
    const char *work;            /* where shards are built and kept for a resume; NULL = dir".partial" */
    int threads;                 /* 0 = the pool's */
    void (*progress)(void *ctx, uint64_t files_done, uint64_t files_total);
    void *progress_ctx;
} mr_files_opts;

void mr_files_opts_init(mr_files_opts *o);

typedef struct mr_files_stats {
    uint64_t files;          /* files the pattern matched */
    uint64_t rows_written;   /* rows in the dataset */
    uint64_t files_skipped;  /* unreadable or escaping files left out (SKIP) */
    uint64_t labels_missing; /* files without a row in the labels file (their label columns are null) */
    uint64_t bytes_read;     /* file bytes read by this call (a resumed call reads only the rest) */
    uint64_t shards_resumed; /* shards kept from an earlier, interrupted call */
    char **skipped;          /* the skipped files' paths, then ": " and why (n = files_skipped) */
    mr_dataset_summary dataset;
} mr_files_stats;

void mr_files_stats_free(mr_files_stats *st); /* frees skipped; st may be NULL */

/* Packs the files pattern matches into the dataset directory dir (created;
 * it should be empty; the CLI builds DIR.tmp.PID and renames it into place),
 * then removes the work directory. stats may be NULL. Errors: MR_E_NOT_FOUND
 * (no file matches; the base directory does not exist), MR_E_IO naming the
 * file that cannot be read (FAIL), MR_E_INVALID_ARG (a path escaping BASE,
 * FAIL; a labels file without a `path` column, or whose row names a path
 * outside BASE or names one twice: file:row), reader errors of the labels
 * file, writer errors. On failure the work directory keeps the finished
 * shards for the next call. */
mr_status mr_files_ingest(const char *pattern, const char *dir, const mr_files_opts *o, mr_files_stats *stats,
                          mr_error *err);

/* The files pattern matches, by mr_files_ingest's rules ("**" included), as
 * paths under its base ("imgs/cat/1.jpg"), sorted: what a pipeline hashes
 * for a dependency pattern with "**". *paths_out (n_out entries) is freed
 * with mr_files_match_free. Errors as mr_files_ingest's walk (MR_E_NOT_FOUND
 * when nothing matches). */
mr_status mr_files_match(const char *pattern, char ***paths_out, size_t *n_out, mr_error *err);
void mr_files_match_free(char **paths, size_t n);

/* The staging directories of an atomic publish into dir (`millrace data
 * ingest`: DIR.tmp.PID holds the dataset being built, DIR.old.PID the one
 * it replaces, between two renames) are left behind when that process is
 * killed. This removes those whose PID names no running process (kill(PID,
 * 0) fails with ESRCH), never those of a live process or of the caller.
 * Call it once a new dataset is in place at dir: before, a DIR.old.PID may
 * hold the only copy of the old one. PIDs are this host's: do not share a
 * directory between hosts ingesting into it at once. *n_removed (may be
 * NULL) counts what was removed. Errors: MR_E_IO (the parent directory
 * cannot be listed, a directory cannot be removed), MR_E_NOMEM. */
mr_status mr_dataset_remove_stale_staging(const char *dir, size_t *n_removed, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
