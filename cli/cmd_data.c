/* millrace data {ingest, inspect, head, stats, export}: datasets outside a
 * pipeline. ingest publishes atomically (DIR.tmp.PID, then rename); the
 * others read a dataset (or any source mr_source_open accepts, for head,
 * stats and export) in one streaming pass. Exit codes: 0 ok, 1 data or I/O
 * error, 2 usage error. */
#include "cli.h"
#include "millrace/dataset.h"
#include "millrace/webdataset.h"
#include "millrace/stats.h"

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>

static const char data_help[] =
    "usage: millrace data <ingest|inspect|head|stats|export> ... [--help]\n"
    "\n"
    "  ingest SRC DIR      read a file, glob or directory of CSV/TSV/JSONL/Parquet into a dataset\n"
    "  inspect DIR         schema, shards, rows and per-column statistics from the manifest\n"
    "  head DIR            the first rows (optionally filtered)\n"
    "  stats DIR           per column: type, nulls, min/max/mean, distinct estimate (one full pass)\n"
    "  export DIR OUT      write the dataset (or a filtered part) as one .parquet or .csv/.tsv file\n"
    "\n"
    "Exit codes: 0 ok, 1 a data or I/O error, 2 a usage error.\n";

static const char ingest_help[] =
    "usage: millrace data ingest SRC DIR [options]\n"
    "\n"
    "Reads SRC (a .csv/.tsv/.jsonl/.parquet file, a glob such as 'logs/*.csv', a directory of such\n"
    "files, or a dataset) and writes the dataset DIR (Parquet shards + manifest.json). DIR is built\n"
    "as DIR.tmp.PID and renamed into place when complete; an existing non-empty DIR is refused\n"
    "unless --force.\n"
    "\n"
    "options:\n"
    "  --schema FILE          YAML mapping column -> type (int64, float64, float32, bool, string,\n"
    "                         date, timestamp, int8..int32, uint8..uint64, decimal(P,S), binary,\n"
    "                         timestamp_local); a declared type never changes\n"
    "  --format F             csv, tsv, jsonl, parquet, dataset (default: by extension)\n"
    "  --delimiter C          CSV field separator (default ','; 'tab' or '\\t' for tabs)\n"
    "  --no-header            the first CSV record is data (columns c0, c1, ...)\n"
    "  --null-values A,B      unquoted fields read as null, replacing the defaults (pandas' NA, N/A, n/a,\n"
    "                         NaN, nan, null, NULL, None, #N/A, ... and -; see docs/data.md); empty is\n"
    "                         always null. A column read as string although > 90% of its values are\n"
    "                         numbers gets a warning naming the first value that is not\n"
    "  --on-error MODE        fail (default), skip, or quarantine: bad rows are counted and written\n"
    "                         unchanged to DIR/quarantine.csv (or --quarantine FILE)\n"
    "  --quarantine FILE      where quarantined rows go (implies --on-error quarantine)\n"
    "  --filter EXPR          keep rows where EXPR is true, e.g. \"country = 'DE'\"\n"
    "  --columns A,B          keep only these columns, in this order\n"
    "  --partition-by A,B     hive partitions (A=value/B=value/ directories)\n"
    "  --rows-per-shard N     default 1000000\n"
    "  --row-group-rows N     default 131072\n"
    "  --row-group-bytes N    a row group also ends at the row that brings its values to N bytes\n"
    "                         (default 134217728: 128 MiB, so multi-megabyte values stay bounded)\n"
    "  --codec C              zstd (default), snappy, gzip, lz4_raw (or lz4), none\n"
    "  --limit N              ingest only the first N good rows\n"
    "  -j, --threads N        parser threads (default: all cores)\n"
    "  --force                replace an existing DIR\n"
    "  --json                 print the summary as JSON\n"
    "\n"
    "Files, one row per file (images, clips, documents):\n"
    "  millrace data ingest --files 'DIR/**/*.jpg' OUT [options]\n"
    "  --files PATTERN        the files to pack: DIR/REST, where * ? [..] match within a name and **\n"
    "                         any number of folders; a plain directory means every file under it.\n"
    "                         Rows: path (relative to DIR), the bytes, and the labels asked for\n"
    "  --column NAME          the bytes column (default image)\n"
    "  --label-from parent-dir   label = the name of the file's folder\n"
    "  --labels FILE          a CSV/TSV/JSONL/Parquet file with a 'path' column: its other columns\n"
    "                         are joined to the files by path\n"
    "  --shuffle SEED         rows in a random order fixed by SEED instead of by path, so that a\n"
    "                         loader's shuffle mixes the classes folders keep together\n"
    "  --on-error skip        leave out (and list) files that cannot be read or that are symbolic\n"
    "                         links out of DIR; the default stops at the first, naming it\n"
    "  Shards hold at most --rows-per-shard files and --row-group-bytes bytes. A killed or failed\n"
    "  ingest keeps its finished shards in OUT.partial: the same command continues after them.\n";

static const char inspect_help[] =
    "usage: millrace data inspect DIR [--json] [--explain FILTER [--columns A,B]]\n"
    "\n"
    "Prints the dataset's schema, partitions, shards and per-column statistics, from the manifest\n"
    "(no shard is read). --explain FILTER runs a scan with FILTER (reading --columns, default all)\n"
    "and reports what each push-down step skipped: partitions, shards, row groups, rows and bytes.\n"
    "DIR may be s3://BUCKET/PREFIX: --explain then also lists every request made (the manifest, one\n"
    "listing, each shard's footer, the coalesced column-chunk ranges) with its byte range and size.\n";

static const char head_help[] =
    "usage: millrace data head SRC [-n N] [--filter EXPR] [--columns A,B] [--json]\n"
    "\n"
    "Prints the first N (default 10) rows of a dataset (or any source) as a table, or with --json\n"
    "as one JSON object per line.\n";

static const char stats_help[] =
    "usage: millrace data stats SRC [--filter EXPR] [--columns A,B] [--json]\n"
    "\n"
    "Reads every row once and prints per column: type, rows, nulls, min, max, mean (numbers and\n"
    "bools) and the number of distinct non-null values: exact (a set of 64-bit value hashes) up\n"
    "to 65536 distinct values, beyond that a HyperLogLog estimate with 2^14 registers (about 0.8%\n"
    "standard error), marked '~' (JSON: distinct_exact false). NaN is counted apart and left out\n"
    "of min/max/mean/distinct.\n";

static const char export_help[] =
    "usage: millrace data export SRC OUT [--filter EXPR] [--columns A,B] [--format webdataset] [--json]\n"
    "\n"
    "Writes SRC (a dataset or any source) to OUT by its extension: .parquet (zstd) or .csv/.tsv\n"
    "(header, RFC 4180 quoting, nulls as empty fields, empty strings as \"\"), or .tar (or\n"
    "--format webdataset): a WebDataset shard, one member KEY.COLUMN per non-null value, the key\n"
    "from __key__, else path without its extension, else the row number. Partition columns\n"
    "are written as ordinary columns. OUT is written to a temporary name and renamed.\n";

/* ---- shared helpers ------------------------------------------------------------------ */



static int data_error(const mr_error *err)
{
    mr_log_error(err);
    switch (err->code) {
    case MR_E_INVALID_ARG: return EXIT_USAGE;
    default: return EXIT_FAILED;
    }
}

static int parse_count(const char *verb, const char *opt, const char *v, long long *out)
{
    char *end = NULL;
    long long n = v ? strtoll(v, &end, 10) : -1;
    if (!v || !*v || *end || n < 0) return cli_usage_error(verb, "%s needs a non-negative integer, got '%s'", opt, v ? v : "");
    *out = n;
    return EXIT_OK;
}

/* A streaming reader over a dataset directory (with push-down) or any
 * other source (filter applied batch by batch). */
typedef struct reader {
    mr_dataset *ds;
    mr_dataset_scan *scan;
    mr_source *src;
    mr_expr *filter; /* sources only */
    int bound;
    char **cols;
    size_t n_cols;
    int delivered; /* a batch went out: later empty ones are skipped */
} reader;

static mr_status reader_open(reader *r, const char *path, const char *filter, char **cols, size_t n_cols, mr_error *err)
{
    memset(r, 0, sizeof *r);
    r->cols = cols;
    r->n_cols = n_cols;
    char *m = mr_path_join(path, MR_DATASET_MANIFEST);
    int is_ds = m && mr_fs_exists(m);
    mr_free(m);
    if (!strncmp(path, "s3://", 5) && !strpbrk(path, "*?[")) { /* a dataset on S3 gets push-down too */
        mr_error e;
        mr_error_init(&e);
        mr_status rc = mr_dataset_open(path, &r->ds, &e);
        if (rc == MR_OK)
            return mr_dataset_scan_open(r->ds, filter, (const char *const *)cols, cols ? n_cols : 0, &r->scan, err);
        if (rc != MR_E_NOT_FOUND) {
            if (err) *err = e;
            return rc;
        }
    }
    if (is_ds) {
        mr_status rc = mr_dataset_open(path, &r->ds, err);
        if (rc == MR_OK)
            rc = mr_dataset_scan_open(r->ds, filter, (const char *const *)cols, cols ? n_cols : 0, &r->scan, err);
        return rc;
    }
    mr_status rc = mr_source_open(path, MR_SRC_AUTO, NULL, &r->src, err);
    if (rc == MR_OK && filter && *filter) rc = mr_expr_parse(filter, strlen(filter), "filter", &r->filter, err);
    return rc;
}

static mr_status reader_next(reader *r, mr_table **out, mr_error *err)
{
    if (r->scan) return mr_dataset_scan_next(r->scan, out, err);
    for (;;) {
        mr_table *t = NULL;
        mr_status rc = mr_source_next(r->src, 0, &t, err);
        if (rc != MR_OK || !t) {
            *out = NULL;
            return rc;
        }
        if (r->filter) {
            if (!r->bound) rc = mr_expr_bind_table(r->filter, t, MR_EXPR_FILTER, err);
            r->bound = 1;
            uint8_t *mask = rc == MR_OK ? mr_malloc(t->n_rows ? t->n_rows : 1) : NULL;
            uint32_t *idx = mask ? mr_malloc((t->n_rows ? t->n_rows : 1) * sizeof *idx) : NULL;
            if (rc == MR_OK && !idx) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            if (rc == MR_OK) rc = mr_expr_eval_filter(r->filter, t, mask, err);
            mr_table *f = NULL;
            if (rc == MR_OK) {
                size_t m = 0;
                for (size_t i = 0; i < t->n_rows; i++)
                    if (mask[i]) idx[m++] = (uint32_t)i;
                rc = mr_table_take(t, idx, m, &f, err);
            }
            mr_free(mask);
            mr_free(idx);
            mr_table_free(t);
            if (rc != MR_OK) return rc;
            t = f;
        }
        if (r->cols) {
            rc = mr_table_project(t, (const char *const *)r->cols, r->n_cols, err);
            if (rc != MR_OK) {
                mr_table_free(t);
                return rc;
            }
        }
        if (t->n_rows == 0 && r->delivered) { /* the first may be empty: it carries the columns */
            mr_table_free(t);
            continue;
        }
        r->delivered = 1;
        *out = t;
        return MR_OK;
    }
}

static void reader_close(reader *r)
{
    mr_dataset_scan_close(r->scan);
    mr_dataset_close(r->ds);
    mr_source_close(r->src, NULL);
    mr_expr_free(r->filter);
}

/* ---- ingest ---------------------------------------------------------------------------- */

static mr_status load_schema(const char *path, mr_value **doc, const char ***names, mr_dtype **types,
                             mr_colkind **kinds, size_t *n,
                             mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(path, (size_t)16 << 20, &text, &len, err);
    if (rc == MR_OK) rc = mr_yaml_parse(text, len, path, doc, err);
    mr_free(text);
    if (rc != MR_OK) return rc;
    const mr_value *m = *doc;
    if (m->kind == MR_V_MAP && mr_value_get(m, "schema") && mr_value_get(m, "schema")->kind == MR_V_MAP)
        m = mr_value_get(m, "schema"); /* also accept {schema: {...}} */
    if (m->kind != MR_V_MAP) {
        rc = MR_ERR(err, MR_E_INVALID_ARG, "%s: expected a mapping of column name -> type", path);
        return rc;
    }
    *names = mr_calloc(m->n ? m->n : 1, sizeof **names);
    *types = mr_calloc(m->n ? m->n : 1, sizeof **types);
    *kinds = mr_calloc(m->n ? m->n : 1, sizeof **kinds);
    if (!*names || !*types || !*kinds) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < m->n; k++) {
        (*names)[k] = m->keys[k];
        if (m->items[k]->kind != MR_V_STR || mr_kind_parse(m->items[k]->str, &(*types)[k], &(*kinds)[k]) != MR_OK) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "column '%s': unknown type", m->keys[k]);
            mr_error_at(err, path, m->items[k]->line, m->items[k]->col);
            mr_error_hint(err, "types: %s", MR_SCHEMA_TYPE_NAMES);
            return rc;
        }
    }
    *n = m->n;
    return MR_OK;
}

static int dir_nonempty(const char *dir)
{
    if (!mr_fs_exists(dir)) return 0;
    if (!mr_fs_is_dir(dir)) return 1;
    DIR *d = opendir(dir);
    if (!d) return 1;
    struct dirent *e;
    int r = 0;
    while (!r && (e = readdir(d)) != NULL) r = strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
    closedir(d);
    return r;
}

typedef struct ingest_progress {
    mr_progress *bar;
} ingest_progress;

static void on_ingest_progress(void *ctx, const mr_ingest_stats *st)
{
    ingest_progress *p = ctx;
    char detail[96];
    snprintf(detail, sizeof detail, "%llu rows written", (unsigned long long)st->rows_written);
    mr_progress_update(p->bar, st->rows_read, detail);
}

/* What `data ingest` was asked to do. The lists are owned (cli_free_list). */
typedef struct ingest_args {
    const char *src, *dir, *schema_path, *quarantine;
    const char *files, *column, *labels; /* --files PATTERN, --column, --labels */
    int label_parent;                    /* --label-from parent-dir */
    int shuffle;                         /* --shuffle SEED */
    uint64_t shuffle_seed;
    char **nulls, **parts, **cols;
    size_t n_nulls, n_parts, n_cols;
    int json, force;
    mr_ingest_opts o;
} ingest_args;

/* Parses the options after "data ingest" into a (and a->o). */
static int ingest_args_parse(int argc, char **argv, ingest_args *a)
{
    int rc = EXIT_OK;
    long long n = 0;
    mr_ingest_opts *o = &a->o;
    for (int i = 2; i < argc && rc == EXIT_OK; i++) {
        const char *arg = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(arg, "--schema")) a->schema_path = v;
        else if (!strcmp(arg, "--files")) a->files = v;
        else if (!strcmp(arg, "--column")) a->column = v;
        else if (!strcmp(arg, "--labels")) a->labels = v;
        else if (!strcmp(arg, "--shuffle")) {
            char *end = NULL;
            unsigned long long seed = v ? strtoull(v, &end, 10) : 0;
            if (v && (!*v || *end || *v == '-'))
                rc = cli_usage_error("data ingest", "--shuffle takes a seed (an integer >= 0), got '%s'", v);
            a->shuffle = 1;
            a->shuffle_seed = (uint64_t)seed;
        } else if (!strcmp(arg, "--label-from")) {
            if (v && !strcmp(v, "parent-dir")) a->label_parent = 1;
            else if (v) rc = cli_usage_error("data ingest", "--label-from takes parent-dir, got '%s'", v);
        } else if (!strcmp(arg, "--format")) {
            if (v && mr_source_format_parse(v, &o->format) != MR_OK)
                rc = cli_usage_error("data ingest", "unknown format '%s' (csv, tsv, jsonl, parquet, dataset, webdataset)", v);
        } else if (!strcmp(arg, "--delimiter")) {
            if (v && (!strcmp(v, "\\t") || !strcasecmp(v, "tab") || !strcmp(v, "\t"))) o->csv.delimiter = '\t';
            else if (v && strlen(v) == 1) o->csv.delimiter = v[0];
            else if (v) rc = cli_usage_error("data ingest", "--delimiter must be one character, got '%s'", v);
        } else if (!strcmp(arg, "--null-values")) {
            cli_free_list(a->nulls);
            a->nulls = v ? cli_split_list(v, &a->n_nulls) : NULL;
        } else if (!strcmp(arg, "--on-error")) {
            if (v && !strcmp(v, "fail")) o->csv.on_error = MR_ON_ERROR_FAIL;
            else if (v && !strcmp(v, "skip")) o->csv.on_error = MR_ON_ERROR_SKIP;
            else if (v && !strcmp(v, "quarantine")) o->csv.on_error = MR_ON_ERROR_QUARANTINE;
            else if (v) rc = cli_usage_error("data ingest", "--on-error must be fail, skip or quarantine, got '%s'", v);
        } else if (!strcmp(arg, "--quarantine")) {
            a->quarantine = v;
            o->csv.on_error = MR_ON_ERROR_QUARANTINE;
        } else if (!strcmp(arg, "--filter")) o->filter = v;
        else if (!strcmp(arg, "--columns")) {
            cli_free_list(a->cols);
            a->cols = v ? cli_split_list(v, &a->n_cols) : NULL;
        } else if (!strcmp(arg, "--partition-by")) {
            cli_free_list(a->parts);
            a->parts = v ? cli_split_list(v, &a->n_parts) : NULL;
        } else if (!strcmp(arg, "--rows-per-shard")) {
            rc = parse_count("data ingest", arg, v, &n);
            if (rc == EXIT_OK) o->write.rows_per_shard = (size_t)n;
        } else if (!strcmp(arg, "--row-group-rows")) {
            rc = parse_count("data ingest", arg, v, &n);
            if (rc == EXIT_OK) o->write.row_group_rows = (size_t)n;
        } else if (!strcmp(arg, "--row-group-bytes")) {
            rc = parse_count("data ingest", arg, v, &n);
            if (rc == EXIT_OK) o->write.row_group_bytes = (size_t)n;
        } else if (!strcmp(arg, "--limit")) {
            rc = parse_count("data ingest", arg, v, &n);
            if (rc == EXIT_OK) o->max_rows = (uint64_t)n;
        } else if (!strcmp(arg, "-j") || !strcmp(arg, "--threads")) {
            rc = parse_count("data ingest", arg, v, &n);
            if (rc == EXIT_OK) o->csv.threads = (int)n;
        } else if (!strcmp(arg, "--codec")) {
            if (v && !strcasecmp(v, "none")) o->write.codec = MR_PQ_UNCOMPRESSED;
            else if (v && mr_parquet_codec_parse(v, &o->write.codec) != MR_OK)
                rc = cli_usage_error("data ingest", "unknown codec '%s' (zstd, snappy, gzip, lz4_raw, none)", v);
        } else {
            takes = 0;
            if (!strcmp(arg, "--json")) a->json = 1;
            else if (!strcmp(arg, "--force")) a->force = 1;
            else if (!strcmp(arg, "--no-header")) o->csv.no_header = 1;
            else if (arg[0] == '-' && arg[1]) rc = cli_usage_error("data ingest", "unknown option '%s'", arg);
            else if (!a->src) a->src = arg;
            else if (!a->dir) a->dir = arg;
            else rc = cli_usage_error("data ingest", "unexpected argument '%s'", arg);
        }
        if (takes && rc == EXIT_OK) {
            if (!v) rc = cli_usage_error("data ingest", "option '%s' needs a value", arg);
            i++;
        }
    }
    if (rc == EXIT_OK && a->files && a->src && !a->dir) { /* data ingest --files PATTERN DIR */
        a->dir = a->src;
        a->src = NULL;
    }
    if (rc == EXIT_OK && a->files && a->src) rc = cli_usage_error("data ingest", "--files PATTERN replaces SRC");
    if (rc == EXIT_OK && !a->files && (a->column || a->labels || a->label_parent || a->shuffle))
        rc = cli_usage_error("data ingest", "--column, --labels, --label-from and --shuffle go with --files");
    if (rc == EXIT_OK && a->files &&
        (a->schema_path || o->filter || a->cols || a->parts || o->max_rows || o->format || a->quarantine ||
         o->csv.on_error == MR_ON_ERROR_QUARANTINE))
        rc = cli_usage_error("data ingest", "--schema, --format, --filter, --columns, --partition-by, --limit and "
                                            "quarantine do not apply to --files");
    if (rc == EXIT_OK && !a->dir) rc = cli_usage_error("data ingest", a->files ? "expected DIR" : "expected SRC and DIR");
    if (rc != EXIT_OK) return rc;
    if (a->nulls) {
        o->csv.null_tokens = (const char *const *)a->nulls;
        o->csv.n_null_tokens = a->n_nulls;
    }
    if (a->parts) {
        o->write.partition_by = (const char *const *)a->parts;
        o->write.n_partition_by = a->n_parts;
    }
    if (a->cols) {
        o->columns = (const char *const *)a->cols;
        o->n_columns = a->n_cols;
    }
    return EXIT_OK;
}

/* Publishes the finished dataset tmp as dir: an existing dir is moved aside
 * to old first and removed once tmp is in place. */
static mr_status publish_dataset(const char *tmp, const char *dir, const char *old, mr_error *err)
{
    if (mr_fs_exists(dir) && rename(dir, old) != 0)
        return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot move the old dataset aside", dir);
    if (rename(tmp, dir) != 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rename into place", dir);
    mr_fs_fsync_dir_of(dir, NULL);
    mr_fs_rmtree(old, NULL);
    return MR_OK;
}

static void print_ingest_summary(const ingest_args *a, const mr_ingest_stats *st, double secs)
{
    int quarantined = a->o.csv.on_error == MR_ON_ERROR_QUARANTINE;
    const char *qname = a->quarantine ? a->quarantine : "quarantine.csv";
    if (a->json) {
        json_t *j = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "source", a->src, "dataset", a->dir,
                              "files", (json_int_t)st->files, "rows_read", (json_int_t)st->rows_read, "rows_written",
                              (json_int_t)st->rows_written, "rows_filtered", (json_int_t)st->rows_filtered, "rows_skipped",
                              (json_int_t)st->rows_skipped, "rows_quarantined", (json_int_t)st->rows_quarantined,
                              "bytes_read", (json_int_t)st->bytes_read, "shards", (json_int_t)st->dataset.shards,
                              "partitions", (json_int_t)st->dataset.partitions, "bytes_written",
                              (json_int_t)st->dataset.bytes, "seconds", secs);
        if (j && quarantined) json_object_set_new(j, "quarantine", json_string(qname));
        char *t = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
        if (t) cli_puts_json(t);
        free(t);
        json_decref(j);
        return;
    }
    printf("ingested %llu rows into %s (%llu shards, %llu partitions, %.1f MB) in %.2fs, %.0f MB/s\n",
           (unsigned long long)st->rows_written, a->dir, (unsigned long long)st->dataset.shards,
           (unsigned long long)st->dataset.partitions, st->dataset.bytes / 1e6, secs,
           secs > 0 ? st->bytes_read / 1e6 / secs : 0.0);
    if (st->rows_filtered) printf("  %llu rows filtered out\n", (unsigned long long)st->rows_filtered);
    if (st->rows_skipped)
        printf("  %llu bad rows skipped%s%s\n", (unsigned long long)st->rows_skipped,
               quarantined ? ", quarantined in " : "", quarantined ? qname : "");
}

static void on_files_progress(void *ctx, uint64_t done, uint64_t total)
{
    ingest_progress *p = ctx;
    char detail[96];
    snprintf(detail, sizeof detail, "of %llu files", (unsigned long long)total);
    mr_progress_update(p->bar, done, detail);
}

/* data ingest --files: packs files into tmp (DIR.partial keeps the finished shards of a killed
 * or failed call, for the next one) and publishes it as a->dir. */
static int ingest_files(const ingest_args *a, const char *tmp, const char *old, size_t dl)
{
    mr_files_opts fo;
    mr_files_opts_init(&fo);
    fo.column = a->column;
    fo.labels = a->labels;
    fo.label_from = a->label_parent ? MR_LABEL_PARENT_DIR : MR_LABEL_NONE;
    fo.shuffle = a->shuffle;
    fo.shuffle_seed = a->shuffle_seed;
    fo.on_error = a->o.csv.on_error;
    fo.write = a->o.write;
    fo.threads = a->o.csv.threads;
    mr_error err;
    mr_error_init(&err);
    char *work = mr_asprintf("%.*s.partial", (int)dl, a->dir);
    if (!work) {
        MR_ERR(&err, MR_E_NOMEM, "out of memory");
        return data_error(&err);
    }
    fo.work = work;
    mr_pool_init(fo.threads, NULL);
    ingest_progress pg = {a->json ? NULL : mr_progress_begin("ingest", 0, "files")};
    fo.progress = on_files_progress;
    fo.progress_ctx = &pg;
    mr_files_stats st;
    double t0 = mr_now();
    mr_status s = mr_files_ingest(a->files, tmp, &fo, &st, &err);
    double secs = mr_now() - t0;
    mr_progress_end(pg.bar, NULL);
    if (s == MR_OK) s = publish_dataset(tmp, a->dir, old, &err);
    int rc = EXIT_OK;
    if (s != MR_OK) {
        mr_fs_rmtree(tmp, NULL);
        rc = data_error(&err);
        if (mr_fs_exists(work))
            fprintf(stderr, "millrace: the shards finished so far are kept in %s: the same command continues "
                            "after them\n", cli_safe(work));
        goto done;
    }
    if (a->json) {
        json_t *j = json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:f}", "files", a->files, "dataset", a->dir,
                              "files_matched", (json_int_t)st.files, "rows_written", (json_int_t)st.rows_written,
                              "files_skipped", (json_int_t)st.files_skipped, "labels_missing",
                              (json_int_t)st.labels_missing, "bytes_read", (json_int_t)st.bytes_read, "shards",
                              (json_int_t)st.dataset.shards, "shards_resumed", (json_int_t)st.shards_resumed,
                              "seconds", secs);
        json_t *sk = j ? json_array() : NULL;
        for (uint64_t i = 0; sk && i < st.files_skipped; i++) json_array_append_new(sk, json_string(st.skipped[i]));
        if (sk) json_object_set_new(j, "skipped", sk);
        char *t = j ? json_dumps(j, JSON_INDENT(1)) : NULL;
        if (t) cli_puts_json(t);
        free(t);
        json_decref(j);
    } else {
        printf("packed %llu files into %s (%llu shards, %.1f MB) in %.2fs, %.0f files/s\n",
               (unsigned long long)st.rows_written, cli_safe(a->dir), (unsigned long long)st.dataset.shards,
               st.dataset.bytes / 1e6, secs, secs > 0 ? (double)st.rows_written / secs : 0.0);
        if (st.shards_resumed)
            printf("  resumed: %llu shards were kept from an interrupted ingest\n",
                   (unsigned long long)st.shards_resumed);
        if (st.labels_missing)
            printf("  %llu files have no row in %s: their label columns are null\n",
                   (unsigned long long)st.labels_missing, cli_safe(a->labels));
    }
    for (uint64_t i = 0; i < st.files_skipped; i++) mr_log(MR_LOG_WARN, "skipped %s", cli_safe(st.skipped[i]));
    if (st.files_skipped && !a->json)
        printf("  %llu files skipped (listed above)\n", (unsigned long long)st.files_skipped);
    if (mr_dataset_remove_stale_staging(a->dir, NULL, &err) != MR_OK) {
        mr_log(MR_LOG_WARN, "%s: %s", cli_safe(a->dir), err.msg);
        mr_error_clear(&err);
    }
done:
    mr_files_stats_free(&st);
    mr_free(work);
    return rc;
}

static int data_ingest(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(ingest_help, stdout);
        return EXIT_OK;
    }
    ingest_args a;
    memset(&a, 0, sizeof a);
    mr_ingest_opts_init(&a.o);
    mr_ingest_opts *o = &a.o;
    mr_value *schema_doc = NULL;
    const char **schema_names = NULL;
    mr_dtype *schema_types = NULL;
    mr_colkind *schema_kinds = NULL;
    char *tmp = NULL, *old = NULL, *qpath = NULL;
    mr_error err;
    mr_error_init(&err);
    int rc = ingest_args_parse(argc, argv, &a);
    if (rc != EXIT_OK) goto done;
    if (!a.force && dir_nonempty(a.dir)) {
        fprintf(stderr, "millrace: error: %s exists and is not empty\nhint: pass --force to replace it\n", a.dir);
        rc = EXIT_USAGE;
        goto done;
    }
    if (a.schema_path &&
        load_schema(a.schema_path, &schema_doc, &schema_names, &schema_types, &schema_kinds, &o->csv.n_schema, &err) !=
            MR_OK) {
        rc = data_error(&err);
        if (err.code != MR_E_NOMEM && err.code != MR_E_IO) rc = EXIT_USAGE;
        goto done;
    }
    o->csv.schema_names = schema_names;
    o->csv.schema_types = schema_types;
    o->csv.schema_kinds = schema_kinds;
    size_t dl = strlen(a.dir);
    while (dl > 1 && a.dir[dl - 1] == '/') dl--;
    tmp = mr_asprintf("%.*s.tmp.%ld", (int)dl, a.dir, (long)getpid());
    old = mr_asprintf("%.*s.old.%ld", (int)dl, a.dir, (long)getpid());
    if (!tmp || !old) {
        MR_ERR(&err, MR_E_NOMEM, "out of memory");
        rc = data_error(&err);
        goto done;
    }
    if (a.files) {
        rc = ingest_files(&a, tmp, old, dl);
        goto done;
    }
    if (o->csv.on_error == MR_ON_ERROR_QUARANTINE) {
        qpath = a.quarantine ? mr_strdup(a.quarantine) : mr_path_join(tmp, "quarantine.csv");
        o->csv.quarantine_path = qpath;
        if (!a.quarantine && mr_fs_mkdirs(tmp, &err) != MR_OK) {
            rc = data_error(&err);
            goto done;
        }
    }
    mr_pool_init(o->csv.threads, NULL);
    ingest_progress pg = {a.json ? NULL : mr_progress_begin("ingest", 0, "rows")};
    o->progress = on_ingest_progress;
    o->progress_ctx = &pg;
    mr_ingest_stats st;
    double t0 = mr_now();
    mr_status s = mr_dataset_ingest(a.src, tmp, o, &st, &err);
    double secs = mr_now() - t0;
    mr_progress_end(pg.bar, NULL);
    if (s == MR_OK) s = publish_dataset(tmp, a.dir, old, &err);
    if (s != MR_OK) {
        mr_fs_rmtree(tmp, NULL);
        if (st.rows_skipped)
            fprintf(stderr, "millrace: %llu bad rows were skipped before the error\n", (unsigned long long)st.rows_skipped);
        rc = data_error(&err);
        goto done;
    }
    print_ingest_summary(&a, &st, secs);
    /* the new dataset is in place: what killed ingests into a.dir left behind can go */
    if (mr_dataset_remove_stale_staging(a.dir, NULL, &err) != MR_OK) {
        mr_log(MR_LOG_WARN, "%s: %s", a.dir, err.msg);
        mr_error_clear(&err);
    }
done:
    mr_value_free(schema_doc);
    mr_free(schema_names);
    mr_free(schema_types);
    mr_free(schema_kinds);
    cli_free_list(a.nulls);
    cli_free_list(a.parts);
    cli_free_list(a.cols);
    mr_free(tmp);
    mr_free(old);
    mr_free(qpath);
    return rc;
}

/* ---- inspect --------------------------------------------------------------------------- */

/* A name from data as a JSON string: valid JSON and safe on a terminal. */
static void json_name(mr_buf *out, const char *s) { mr_buf_json_text(out, s ? s : "", s ? strlen(s) : 0); }

/* Formats a manifest bound of column type t into out (as JSON when json). */
static void put_bound(mr_buf *out, mr_dtype t, mr_colkind k, const mr_dataset_col_stats *s, int is_max, int json)
{
    mr_column *c = NULL;
    if (mr_column_new("v", t == MR_T_FLOAT32 ? MR_T_FLOAT64 : t, 1, &c, NULL) != MR_OK) return;
    c->kind = k; /* a DECIMAL's scale */
    const mr_dataset_col_stats *x = s;
    switch (t) {
    case MR_T_BOOL: mr_column_append_bool(c, is_max ? x->max.b : x->min.b); break;
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: mr_column_append_int64(c, is_max ? x->max.i : x->min.i); break;
    case MR_T_DATE: mr_column_append_int32(c, (int32_t)(is_max ? x->max.i : x->min.i)); break;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32: mr_column_append_float64(c, is_max ? x->max.f : x->min.f); break;
    case MR_T_STRING:
        if (is_max) mr_column_append_str(c, x->max.s.ptr, x->max.s.len);
        else mr_column_append_str(c, x->min.s.ptr, x->min.s.len);
        break;
    default: mr_column_append_null(c); break;
    }
    mr_buf v;
    mr_buf_init(&v);
    mr_column_format(c, 0, &v);
    int numeric = t == MR_T_INT64 || t == MR_T_DECIMAL || ((t == MR_T_FLOAT64 || t == MR_T_FLOAT32) && isfinite(is_max ? x->max.f : x->min.f));
    if (json && t == MR_T_BOOL) mr_buf_puts(out, (is_max ? x->max.b : x->min.b) ? "true" : "false");
    else if (json && !numeric) mr_buf_json_text(out, v.data ? v.data : "", v.len);
    else mr_buf_append(out, v.data ? v.data : "", v.len);
    mr_buf_free(&v);
    mr_column_free(c);
}

static int bound_less(mr_dtype t, const mr_dataset_col_stats *a, const mr_dataset_col_stats *b, int is_max)
{
    /* 1 when a's bound is "better" (smaller min / larger max) than b's. */
    int cmp = 0;
    switch (t) {
    case MR_T_BOOL: cmp = (is_max ? a->max.b : a->min.b) - (is_max ? b->max.b : b->min.b); break;
    case MR_T_INT64:
    case MR_T_DATE:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: {
        int64_t x = is_max ? a->max.i : a->min.i, y = is_max ? b->max.i : b->min.i;
        cmp = x < y ? -1 : x > y;
        break;
    }
    case MR_T_FLOAT64:
    case MR_T_FLOAT32: {
        double x = is_max ? a->max.f : a->min.f, y = is_max ? b->max.f : b->min.f;
        cmp = x < y ? -1 : x > y;
        break;
    }
    case MR_T_STRING: {
        const char *p = is_max ? a->max.s.ptr : a->min.s.ptr, *q = is_max ? b->max.s.ptr : b->min.s.ptr;
        size_t pl = is_max ? a->max.s.len : a->min.s.len, ql = is_max ? b->max.s.len : b->min.s.len;
        int c = memcmp(p, q, pl < ql ? pl : ql);
        cmp = c ? c : (pl < ql ? -1 : pl > ql);
        break;
    }
    default: break;
    }
    return is_max ? cmp > 0 : cmp < 0;
}

static int inspect_explain(const char *dir, const char *filter, char **cols, size_t n_cols, int json)
{
    mr_error err;
    mr_error_init(&err);
    mr_dataset *ds = NULL;
    mr_dataset_scan *scan = NULL;
    mr_buf out;
    mr_buf_init(&out);
    mr_status s = mr_dataset_open(dir, &ds, &err);
    if (s == MR_OK) s = mr_dataset_scan_open(ds, filter, (const char *const *)cols, cols ? n_cols : 0, &scan, &err);
    mr_table *t = NULL;
    while (s == MR_OK && (s = mr_dataset_scan_next(scan, &t, &err)) == MR_OK && t) {
        mr_table_free(t);
        t = NULL;
    }
    int rc = EXIT_OK;
    if (s != MR_OK) {
        rc = err.code == MR_E_PARSE || err.code == MR_E_NOT_FOUND || err.code == MR_E_SCHEMA ? EXIT_USAGE : EXIT_FAILED;
        if (!ds) rc = EXIT_FAILED; /* the dataset itself: not a usage error */
        mr_log_error(&err);
    } else {
        mr_dataset_explain ex;
        mr_dataset_scan_explain(scan, &ex);
        size_t nr = mr_dataset_n_requests(ds);
        if (json) {
            mr_buf_puts(&out, "{\"filter\":");
            json_name(&out, filter);
            mr_buf_puts(&out, ",\"explain\":");
            mr_dataset_explain_json(&ex, &out);
            if (nr) mr_buf_puts(&out, ",\"requests\":[");
            for (size_t i = 0; i < nr; i++) {
                mr_dataset_request q;
                mr_dataset_request_at(ds, i, &q);
                mr_buf_printf(&out, "%s{\"what\":\"%s\",\"key\":", i ? "," : "", q.what);
                json_name(&out, q.key);
                mr_buf_printf(&out, ",\"offset\":%llu,\"length\":%llu,\"bytes\":%llu}", (unsigned long long)q.off,
                              (unsigned long long)q.len, (unsigned long long)q.bytes);
            }
            mr_buf_puts(&out, nr ? "]}\n" : "}\n");
        } else {
            mr_buf_printf(&out, "filter: %s\n", cli_safe(filter));
            mr_dataset_explain_format(&ex, &out);
            if (nr) {
                mr_buf_printf(&out, "requests:   %llu, %llu bytes received (dataset: %llu bytes)\n",
                              (unsigned long long)ex.requests, (unsigned long long)ex.request_bytes,
                              (unsigned long long)ex.bytes_total);
                for (size_t i = 0; i < nr; i++) {
                    mr_dataset_request q;
                    mr_dataset_request_at(ds, i, &q);
                    char range[64] = "";
                    if (q.len)
                        snprintf(range, sizeof range, " bytes=%llu-%llu", (unsigned long long)q.off,
                                 (unsigned long long)(q.off + q.len - 1));
                    mr_buf_printf(&out, "  %-8s %s%s  %llu bytes\n", q.what, cli_safe(q.key), range,
                                  (unsigned long long)q.bytes);
                }
                if ((uint64_t)nr < ex.requests)
                    mr_buf_printf(&out, "  ... and %llu more\n", (unsigned long long)(ex.requests - nr));
            }
        }
        cli_print(&out);
    }
    mr_buf_free(&out);
    mr_dataset_scan_close(scan);
    mr_dataset_close(ds);
    return rc;
}

static int data_inspect(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(inspect_help, stdout);
        return EXIT_OK;
    }
    const char *dir = NULL, *explain = NULL;
    char **cols = NULL;
    size_t n_cols = 0;
    int json = 0, rc = EXIT_OK;
    for (int i = 2; i < argc && rc == EXIT_OK; i++) {
        if (!strcmp(argv[i], "--json")) json = 1;
        else if (!strcmp(argv[i], "--explain") && i + 1 < argc) explain = argv[++i];
        else if (!strcmp(argv[i], "--columns") && i + 1 < argc) cols = cli_split_list(argv[++i], &n_cols);
        else if (argv[i][0] != '-' && !dir) dir = argv[i];
        else rc = cli_usage_error("data inspect", "unexpected argument '%s'", argv[i]);
    }
    if (rc == EXIT_OK && !dir) rc = cli_usage_error("data inspect", "expected DIR");
    if (rc == EXIT_OK && explain) {
        rc = inspect_explain(dir, explain, cols, n_cols, json);
        cli_free_list(cols);
        return rc;
    }
    cli_free_list(cols);
    if (rc != EXIT_OK) return rc;
    mr_error err;
    mr_error_init(&err);
    mr_dataset *ds = NULL;
    if (mr_dataset_open(dir, &ds, &err) != MR_OK) return data_error(&err);
    size_t nc = mr_dataset_n_cols(ds), ns = mr_dataset_n_shards(ds), np = mr_dataset_n_partition_cols(ds);
    uint64_t bytes = 0, rgs = 0;
    for (size_t i = 0; i < ns; i++) {
        mr_dataset_shard_info si;
        mr_dataset_shard(ds, i, &si);
        bytes += si.bytes;
        rgs += si.row_groups;
    }
    mr_buf out;
    mr_buf_init(&out);
    if (json) {
        mr_buf_puts(&out, "{\"path\":");
        json_name(&out, dir);
        mr_buf_printf(&out, ",\"rows\":%llu,\"bytes\":%llu,\"n_shards\":%zu,\"row_groups\":%llu,\"partitions\":%zu,\"partition_by\":[",
                      (unsigned long long)mr_dataset_n_rows(ds), (unsigned long long)bytes, ns, (unsigned long long)rgs,
                      mr_dataset_n_partitions(ds));
        for (size_t k = 0; k < np; k++) {
            if (k) mr_buf_puts(&out, ",");
            json_name(&out, mr_dataset_col_name(ds, mr_dataset_partition_col(ds, k)));
        }
        mr_buf_puts(&out, "],\"columns\":[");
    } else {
        mr_buf_printf(&out, "dataset %s: %llu rows, %zu columns, %zu shards, %llu row groups, %zu partitions, %llu bytes\n", cli_safe(dir),
                      (unsigned long long)mr_dataset_n_rows(ds), nc, ns, (unsigned long long)rgs, mr_dataset_n_partitions(ds),
                      (unsigned long long)bytes);
        if (np) {
            mr_buf_puts(&out, "partitioned by:");
            for (size_t k = 0; k < np; k++) mr_buf_printf(&out, " %s", cli_safe(mr_dataset_col_name(ds, mr_dataset_partition_col(ds, k))));
            mr_buf_puts(&out, "\n");
        }
        mr_buf_printf(&out, "\n%-24s %-10s %-9s %12s  %-24s %-24s\n", "COLUMN", "TYPE", "NULLABLE", "NULLS", "MIN", "MAX");
    }
    for (size_t j = 0; j < nc; j++) {
        mr_dtype t = mr_dataset_col_type(ds, j);
        uint64_t nulls = 0, nans = 0;
        const mr_dataset_col_stats *lo = NULL, *hi = NULL;
        for (size_t i = 0; i < ns; i++) {
            const mr_dataset_col_stats *s = mr_dataset_shard_stats(ds, i, j);
            if (!s) continue;
            nulls += s->null_count;
            nans += s->nan_count;
            if (!s->has_min_max) continue;
            if (!lo || bound_less(t, s, lo, 0)) lo = s;
            if (!hi || bound_less(t, s, hi, 1)) hi = s;
        }
        int is_part = 0;
        for (size_t k = 0; k < np; k++) is_part |= mr_dataset_partition_col(ds, k) == j;
        if (json) {
            if (j) mr_buf_puts(&out, ",");
            mr_buf_puts(&out, "{\"name\":");
            json_name(&out, mr_dataset_col_name(ds, j));
            mr_buf_printf(&out, ",\"type\":\"%s\",\"nullable\":%s,\"partition\":%s,\"null_count\":%llu", mr_dtype_name(t),
                          mr_dataset_col_nullable(ds, j) ? "true" : "false", is_part ? "true" : "false",
                          (unsigned long long)nulls);
            mr_colkind kd = mr_dataset_col_kind(ds, j);
            char kn[24];
            if (kd.int_bits || kd.flags || t == MR_T_DECIMAL) mr_buf_printf(&out, ",\"kind\":\"%s\"", mr_kind_name(t, kd, kn, sizeof kn));
            if (t == MR_T_FLOAT64 || t == MR_T_FLOAT32) mr_buf_printf(&out, ",\"nan_count\":%llu", (unsigned long long)nans);
            mr_buf_puts(&out, ",\"min\":");
            if (lo) put_bound(&out, t, mr_dataset_col_kind(ds, j), lo, 0, 1);
            else mr_buf_puts(&out, "null");
            mr_buf_puts(&out, ",\"max\":");
            if (hi) put_bound(&out, t, mr_dataset_col_kind(ds, j), hi, 1, 1);
            else mr_buf_puts(&out, "null");
            mr_buf_puts(&out, "}");
        } else {
            mr_buf a, b;
            mr_buf_init(&a);
            mr_buf_init(&b);
            if (lo) put_bound(&a, t, mr_dataset_col_kind(ds, j), lo, 0, 0);
            if (hi) put_bound(&b, t, mr_dataset_col_kind(ds, j), hi, 1, 0);
            const char *nm = mr_dataset_col_name(ds, j);
            cli_cell(&out, nm, strlen(nm), 24, 0);
            char kn[24];
            mr_buf_printf(&out, " %-10s %-9s %12llu  ", mr_kind_name(t, mr_dataset_col_kind(ds, j), kn, sizeof kn),
                          mr_dataset_col_nullable(ds, j) ? "yes" : "no",
                          (unsigned long long)nulls);
            cli_cell(&out, a.data ? a.data : "-", a.data ? a.len : 1, 24, 1);
            mr_buf_puts(&out, " ");
            cli_cell(&out, b.data ? b.data : "-", b.data ? b.len : 1, 24, 1);
            mr_buf_printf(&out, "%s\n", is_part ? "  (partition)" : "");
            mr_buf_free(&a);
            mr_buf_free(&b);
        }
    }
    if (json) mr_buf_puts(&out, "],\"shards\":[");
    else mr_buf_printf(&out, "\n%-48s %10s %10s %12s\n", "SHARD", "ROWS", "ROW GROUPS", "BYTES");
    for (size_t i = 0; i < ns; i++) {
        mr_dataset_shard_info si;
        mr_dataset_shard(ds, i, &si);
        if (json) {
            if (i) mr_buf_puts(&out, ",");
            mr_buf_puts(&out, "{\"path\":");
            json_name(&out, si.path);
            mr_buf_printf(&out, ",\"rows\":%llu,\"row_groups\":%llu,\"bytes\":%llu,\"hash\":\"%s\"}", (unsigned long long)si.rows,
                          (unsigned long long)si.row_groups, (unsigned long long)si.bytes, si.hash);
        } else {
            mr_buf_printf(&out, "%-48s %10llu %10llu %12llu\n", cli_safe(si.path), (unsigned long long)si.rows,
                          (unsigned long long)si.row_groups, (unsigned long long)si.bytes);
        }
    }
    if (json) mr_buf_puts(&out, "]}\n");
    cli_print(&out);
    mr_buf_free(&out);
    mr_dataset_close(ds);
    return rc;
}

/* ---- head ------------------------------------------------------------------------------ */

/* Appends value i of c as JSON. */
static void put_json_value(mr_buf *out, const mr_column *c, size_t i, mr_buf *tmp)
{
    if (mr_column_is_null(c, i)) {
        mr_buf_puts(out, "null");
        return;
    }
    tmp->len = 0;
    mr_column_format(c, i, tmp);
    const char *s = tmp->data ? tmp->data : "";
    switch (c->type) {
    case MR_T_BOOL:
    case MR_T_INT64:
    case MR_T_DECIMAL: mr_buf_puts(out, s); break; /* "12.50": a JSON number, at the decimal's scale */
    case MR_T_FLOAT64:
    case MR_T_FLOAT32: {
        double v = c->type == MR_T_FLOAT64 ? ((const double *)c->data)[i] : ((const float *)c->data)[i];
        if (isfinite(v)) mr_buf_puts(out, s);
        else mr_buf_json_str(out, s);
        break;
    }
    case MR_T_STRING: { /* valid JSON whatever the bytes: not UTF-8 becomes U+FFFD (docs/data.md) */
        size_t len = 0;
        const char *p = mr_column_str(c, i, &len);
        mr_buf_json_text(out, p, len);
        break;
    }
    default: mr_buf_json_str(out, s); break;
    }
}

static int parse_read_opts(const char *verb, int argc, char **argv, int first, const char **src, const char **out_path,
                           const char **filter, char ***cols, size_t *n_cols, long long *n, int *json)
{
    int rc = EXIT_OK;
    for (int i = first; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) *json = 1;
        else if (!strcmp(a, "--filter") && i + 1 < argc) *filter = argv[++i];
        else if (!strcmp(a, "--columns") && i + 1 < argc) {
            cli_free_list(*cols);
            *cols = cli_split_list(argv[++i], n_cols);
        } else if (n && (!strcmp(a, "-n") || !strcmp(a, "--rows"))) rc = parse_count(verb, a, i + 1 < argc ? argv[++i] : NULL, n);
        else if (a[0] == '-' && a[1]) rc = cli_usage_error(verb, "unknown option or missing value: '%s'", a);
        else if (!*src) *src = a;
        else if (out_path && !*out_path) *out_path = a;
        else rc = cli_usage_error(verb, "unexpected argument '%s'", a);
    }
    if (rc == EXIT_OK && !*src) rc = cli_usage_error(verb, "expected SRC");
    if (rc == EXIT_OK && out_path && !*out_path) rc = cli_usage_error(verb, "expected SRC and OUT");
    return rc;
}

static int open_error(const mr_error *err)
{
    mr_log_error(err);
    return err->code == MR_E_PARSE || err->code == MR_E_SCHEMA || (err->code == MR_E_NOT_FOUND && !err->file[0]) ||
                   err->code == MR_E_INVALID_ARG
               ? EXIT_USAGE
               : EXIT_FAILED;
}

static int data_head(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(head_help, stdout);
        return EXIT_OK;
    }
    const char *src = NULL, *filter = NULL;
    char **cols = NULL;
    size_t n_cols = 0;
    long long n = 10;
    int json = 0;
    int rc = parse_read_opts("data head", argc, argv, 2, &src, NULL, &filter, &cols, &n_cols, &n, &json);
    if (rc != EXIT_OK) {
        cli_free_list(cols);
        return rc;
    }
    mr_error err;
    mr_error_init(&err);
    reader r;
    mr_table *acc = NULL, *t = NULL;
    mr_status s = reader_open(&r, src, filter, cols, n_cols, &err);
    if (s != MR_OK) rc = open_error(&err);
    while (rc == EXIT_OK && (!acc || acc->n_rows < (size_t)n)) {
        s = reader_next(&r, &t, &err);
        if (s != MR_OK) {
            rc = open_error(&err);
            break;
        }
        if (!t) break;
        if (!acc) {
            acc = t;
        } else {
            for (size_t j = 0; j < t->n_cols; j++) mr_column_materialize(t->cols[j], NULL);
            for (size_t j = 0; j < acc->n_cols; j++) mr_column_materialize(acc->cols[j], NULL);
            s = mr_table_append(acc, t, &err);
            mr_table_free(t);
            if (s != MR_OK) rc = open_error(&err);
        }
        t = NULL;
    }
    if (rc == EXIT_OK) {
        size_t rows = acc ? (acc->n_rows < (size_t)n ? acc->n_rows : (size_t)n) : 0;
        size_t nc = acc ? acc->n_cols : 0;
        mr_buf out, v;
        mr_buf_init(&out);
        mr_buf_init(&v);
        if (json) {
            for (size_t i = 0; i < rows; i++) {
                mr_buf_puts(&out, "{");
                for (size_t j = 0; j < nc; j++) {
                    if (j) mr_buf_puts(&out, ",");
                    json_name(&out, acc->cols[j]->name);
                    mr_buf_puts(&out, ":");
                    put_json_value(&out, acc->cols[j], i, &v);
                }
                mr_buf_puts(&out, "}\n");
            }
        } else if (acc) {
            /* names and values as text for a terminal (cli_cell escapes), at most 40 bytes wide */
            size_t *w = mr_calloc(nc ? nc : 1, sizeof *w);
            for (size_t j = 0; w && j < nc; j++) {
                const char *nm = acc->cols[j]->name;
                w[j] = cli_safe_len(nm, strlen(nm));
                for (size_t i = 0; i < rows; i++) {
                    v.len = 0;
                    mr_column_format(acc->cols[j], i, &v);
                    size_t vl = v.data ? cli_safe_len(v.data, v.len) : 0;
                    if (vl > w[j]) w[j] = vl;
                }
                if (w[j] > 40) w[j] = 40;
            }
            for (size_t j = 0; w && j < nc; j++) {
                if (j) mr_buf_puts(&out, "  ");
                cli_cell(&out, acc->cols[j]->name, strlen(acc->cols[j]->name), w[j], 1);
            }
            mr_buf_puts(&out, "\n");
            for (size_t i = 0; w && i < rows; i++) {
                for (size_t j = 0; j < nc; j++) {
                    v.len = 0;
                    mr_column_format(acc->cols[j], i, &v);
                    if (j) mr_buf_puts(&out, "  ");
                    cli_cell(&out, v.data, v.len, w[j], 1);
                }
                mr_buf_puts(&out, "\n");
            }
            mr_free(w);
        }
        cli_print(&out);
        mr_buf_free(&out);
        mr_buf_free(&v);
    }
    mr_table_free(acc);
    reader_close(&r);
    cli_free_list(cols);
    return rc;
}

/* ---- stats ----------------------------------------------------------------------------- */

static int data_stats(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(stats_help, stdout);
        return EXIT_OK;
    }
    const char *src = NULL, *filter = NULL;
    char **cols = NULL;
    size_t n_cols = 0;
    int json = 0;
    int rc = parse_read_opts("data stats", argc, argv, 2, &src, NULL, &filter, &cols, &n_cols, NULL, &json);
    if (rc != EXIT_OK) {
        cli_free_list(cols);
        return rc;
    }
    mr_error err;
    mr_error_init(&err);
    reader r;
    mr_stats *st = NULL;
    mr_table *t = NULL;
    double t0 = mr_now();
    mr_pool_init(0, NULL);
    if (reader_open(&r, src, filter, cols, n_cols, &err) != MR_OK || mr_stats_new(&st, &err) != MR_OK) rc = open_error(&err);
    while (rc == EXIT_OK) {
        if (reader_next(&r, &t, &err) != MR_OK) {
            rc = open_error(&err);
            break;
        }
        if (!t) break;
        if (mr_stats_add(st, t, &err) != MR_OK) rc = data_error(&err);
        mr_table_free(t);
        t = NULL;
    }
    if (rc == EXIT_OK) {
        mr_buf out, lo, hi;
        mr_buf_init(&out);
        mr_buf_init(&lo);
        mr_buf_init(&hi);
        unsigned long long rows = (unsigned long long)mr_stats_rows(st);
        if (json) mr_buf_printf(&out, "{\"rows\":%llu,\"seconds\":%.6f,\"distinct\":\"exact up to 65536, else hyperloglog-p14\",\"columns\":[",
                                rows, mr_now() - t0);
        else mr_buf_printf(&out, "%llu rows\n%-24s %-10s %12s %10s  %-22s %-22s %-14s %12s\n", rows,
                           "COLUMN", "TYPE", "NULLS", "NAN", "MIN", "MAX", "MEAN", "DISTINCT");
        for (size_t j = 0; j < mr_stats_n_cols(st); j++) {
            mr_stats_column a;
            mr_stats_column_get(st, j, &a);
            lo.len = hi.len = 0;
            mr_stats_format_bound(st, j, 0, &lo);
            mr_stats_format_bound(st, j, 1, &hi);
            if (json) {
                if (j) mr_buf_puts(&out, ",");
                mr_buf_puts(&out, "{\"name\":");
                json_name(&out, a.name);
                mr_buf_printf(&out, ",\"type\":\"%s\",\"rows\":%llu,\"nulls\":%llu,\"nans\":%llu,\"min\":", mr_dtype_name(a.type),
                              (unsigned long long)a.rows, (unsigned long long)a.nulls, (unsigned long long)a.nans);
                int num = a.type == MR_T_INT64 || a.type == MR_T_FLOAT64 || a.type == MR_T_FLOAT32 || a.type == MR_T_DECIMAL;
                if (!a.has_min_max) mr_buf_puts(&out, "null,\"max\":null");
                else if (num) mr_buf_printf(&out, "%s,\"max\":%s", lo.data, hi.data);
                else {
                    mr_buf_json_text(&out, lo.data ? lo.data : "", lo.len);
                    mr_buf_puts(&out, ",\"max\":");
                    mr_buf_json_text(&out, hi.data ? hi.data : "", hi.len);
                }
                if (a.has_mean) mr_buf_printf(&out, ",\"mean\":%.17g", a.mean);
                else mr_buf_puts(&out, ",\"mean\":null");
                mr_buf_printf(&out, ",\"distinct_estimate\":%.0f,\"distinct_exact\":%s}", a.distinct, a.distinct_exact ? "true" : "false");
            } else {
                char m[32] = "-";
                if (a.has_mean) snprintf(m, sizeof m, "%.6g", a.mean);
                cli_cell(&out, a.name, strlen(a.name), 24, 0);
                mr_buf_printf(&out, " %-10s %12llu %10llu  ", mr_dtype_name(a.type), (unsigned long long)a.nulls,
                              (unsigned long long)a.nans);
                cli_cell(&out, lo.data ? lo.data : "-", lo.data ? lo.len : 1, 22, 1);
                mr_buf_puts(&out, " ");
                cli_cell(&out, hi.data ? hi.data : "-", hi.data ? hi.len : 1, 22, 1);
                mr_buf_printf(&out, " %-14s %12.0f%s\n", m, a.distinct, a.distinct_exact ? "" : "~");
            }
        }
        if (json) mr_buf_puts(&out, "]}\n");
        else mr_buf_puts(&out, "(DISTINCT: exact up to 65536 values; beyond, marked ~, a HyperLogLog estimate, 2^14 registers, ~0.8% error)\n");
        cli_print(&out);
        mr_buf_free(&out);
        mr_buf_free(&lo);
        mr_buf_free(&hi);
    }
    mr_stats_free(st);
    reader_close(&r);
    cli_free_list(cols);
    return rc;
}

/* ---- export ---------------------------------------------------------------------------- */

static int data_export(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(export_help, stdout);
        return EXIT_OK;
    }
    const char *src = NULL, *out_path = NULL, *filter = NULL;
    char **cols = NULL;
    size_t n_cols = 0;
    int json = 0, wds = 0, rc = EXIT_OK;
    /* --format webdataset: taken out before the read options are parsed */
    char **av = mr_calloc((size_t)argc + 1, sizeof *av);
    int ac = 0;
    if (!av) return cli_usage_error("data export", "out of memory");
    for (int i = 0; i < argc; i++) {
        if (strcmp(argv[i], "--format")) {
            av[ac++] = argv[i];
            continue;
        }
        const char *f = i + 1 < argc ? argv[++i] : "";
        if (!strcasecmp(f, "webdataset") || !strcasecmp(f, "wds")) wds = 1;
        else if (rc == EXIT_OK) rc = cli_usage_error("data export", "--format takes webdataset (else OUT's extension decides), got '%s'", f);
    }
    if (rc == EXIT_OK) rc = parse_read_opts("data export", ac, av, 2, &src, &out_path, &filter, &cols, &n_cols, NULL, &json);
    mr_free(av);
    const char *dot = out_path ? strrchr(out_path, '.') : NULL;
    int parquet = !wds && dot && (!strcasecmp(dot, ".parquet") || !strcasecmp(dot, ".pq"));
    char delim = dot && (!strcasecmp(dot, ".tsv") || !strcasecmp(dot, ".tab")) ? '\t' : ',';
    if (dot && !strcasecmp(dot, ".tar")) wds = 1;
    if (rc == EXIT_OK && !wds && !parquet && !(dot && (!strcasecmp(dot, ".csv") || delim == '\t')))
        rc = cli_usage_error("data export", "OUT must end in .parquet, .csv, .tsv or .tar, got '%s'", out_path);
    if (rc != EXIT_OK) {
        cli_free_list(cols);
        return rc;
    }
    mr_error err;
    mr_error_init(&err);
    reader r;
    mr_table *t = NULL;
    mr_csv_writer *cw = NULL;
    mr_parquet_writer *pw = NULL;
    mr_wds_writer *ww = NULL;
    uint64_t rows = 0;
    int started = 0;
    double t0 = mr_now();
    char *tmp = parquet ? mr_asprintf("%s.tmp.%ld", out_path, (long)getpid()) : NULL;
    mr_status s = tmp || !parquet ? reader_open(&r, src, filter, cols, n_cols, &err)
                                  : MR_ERR(&err, MR_E_NOMEM, "out of memory");
    if (s != MR_OK) {
        rc = open_error(&err);
        if (parquet && !tmp) memset(&r, 0, sizeof r);
        goto done;
    }
    if (wds) {
        s = mr_wds_writer_open(out_path, &ww, &err);
    } else if (parquet) {
        mr_parquet_write_opts po;
        mr_parquet_write_opts_init(&po);
        s = mr_parquet_writer_open(tmp, &po, &pw, &err);
    } else {
        s = mr_csv_writer_open(out_path, delim, &cw, &err);
    }
    while (s == MR_OK) {
        s = reader_next(&r, &t, &err);
        if (s != MR_OK) break;
        int last = 0; /* the schema of a read that found no row, written once */
        if (!t) {
            if (started || !r.ds) break;
            last = 1;
            /* no row at all: write the (projected) schema with zero rows */
            s = mr_table_new(&t, &err);
            for (size_t j = 0; s == MR_OK && j < mr_dataset_n_cols(r.ds); j++) {
                const char *name = mr_dataset_col_name(r.ds, j);
                int keep = !cols;
                for (size_t k = 0; cols && k < n_cols; k++) keep |= !strcmp(cols[k], name);
                mr_column *c = NULL;
                if (keep) s = mr_column_new(name, mr_dataset_col_type(r.ds, j), 0, &c, &err);
                if (s == MR_OK && c) c->kind = mr_dataset_col_kind(r.ds, j);
                if (s == MR_OK && c) s = mr_table_add_column(t, c, &err);
            }
            if (s == MR_OK && cols) s = mr_table_project(t, (const char *const *)cols, n_cols, &err);
            if (s != MR_OK) break;
        }
        s = wds ? mr_wds_writer_write(ww, t, &err)
            : parquet ? mr_parquet_writer_write(pw, t, &err) : mr_csv_writer_write(cw, t, &err);
        rows += t->n_rows;
        started = 1;
        mr_table_free(t);
        t = NULL;
        if (last) break;
    }
    if (wds) {
        if (s == MR_OK) s = mr_wds_writer_close(ww, NULL, &err);
        else mr_wds_writer_free(ww);
        ww = NULL;
    } else if (parquet) {
        if (s == MR_OK) s = mr_parquet_writer_close(pw, &err);
        else mr_parquet_writer_free(pw);
        pw = NULL;
        if (s == MR_OK && mr_fs_fsync_path(tmp, &err) == MR_OK && rename(tmp, out_path) != 0)
            s = MR_ERR_SYS(&err, MR_E_IO, errno, "%s: cannot rename into place", out_path);
        if (s == MR_OK && mr_error_is_set(&err)) s = err.code;
        if (s != MR_OK) unlink(tmp);
    } else {
        if (s == MR_OK) s = mr_csv_writer_close(cw, &err);
        else mr_csv_writer_free(cw);
        cw = NULL;
    }
    if (s != MR_OK) {
        rc = open_error(&err);
    } else if (json) {
        printf("{\"output\": \"%s\", \"rows\": %llu, \"seconds\": %.6f}\n", out_path, (unsigned long long)rows, mr_now() - t0);
    } else {
        printf("exported %llu rows to %s in %.2fs\n", (unsigned long long)rows, out_path, mr_now() - t0);
    }
done:
    mr_free(tmp);
    reader_close(&r);
    cli_free_list(cols);
    return rc;
}

/* ---- dispatch -------------------------------------------------------------------------- */

int cmd_data(int argc, char **argv)
{
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fputs(data_help, argc < 2 ? stderr : stdout);
        return argc < 2 ? EXIT_USAGE : EXIT_OK;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "ingest")) return data_ingest(argc, argv);
    if (!strcmp(sub, "inspect")) return data_inspect(argc, argv);
    if (!strcmp(sub, "head")) return data_head(argc, argv);
    if (!strcmp(sub, "stats")) return data_stats(argc, argv);
    if (!strcmp(sub, "export")) return data_export(argc, argv);
    static const char *const subs[] = {"ingest", "inspect", "head", "stats", "export"};
    fprintf(stderr, "millrace data: error: unknown subcommand '%s'\n", sub);
    const char *best = mr_closest(sub, subs, 5);
    if (best) fprintf(stderr, "hint: did you mean 'millrace data %s'?\n", best);
    return EXIT_USAGE;
}
