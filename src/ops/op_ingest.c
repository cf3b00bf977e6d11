/* The ingest op: reads a source (a file, a glob, a directory of files, a
 * dataset, or ${stages.X}) and writes it as a dataset (Parquet shards +
 * manifest.json) into the stage's output, with an optional declared schema,
 * row filter, column subset and hive partitioning. Bad rows fail the stage,
 * or are skipped / quarantined and counted; quarantined rows are kept inside
 * the artifact (quarantine.csv or quarantine.jsonl next to manifest.json). */
#include "millrace/dataset.h"
#include "millrace/op.h"
#include "ops_int.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define SMOKE_ROWS 10000u

static const mr_param_def ingest_params[] = {
    {"source", MR_PT_STR | MR_PT_PATH, 1, "file, glob, directory of files, dataset, or ${stages.X}"},
    {"format", MR_PT_STR, 0, "csv, tsv, jsonl, parquet, dataset or auto (default: by extension)"},
    {"schema", MR_PT_MAP, 0, "declared column types: {name: int64|float64|float32|bool|string|date|timestamp}"},
    {"delimiter", MR_PT_STR, 0, "CSV field separator: one character, or \\t / tab (default ',')"},
    {"header", MR_PT_BOOL, 0, "the first CSV record names the columns (default true)"},
    {"null_values", MR_PT_STRSEQ, 0, "unquoted CSV fields read as null (default: pandas' missing-value tokens and -, docs/data.md; empty is always null)"},
    {"on_error", MR_PT_STR, 0, "bad rows: fail (default), skip, or quarantine (kept in quarantine.csv in the output)"},
    {"filter", MR_PT_STR, 0, "keep only rows where this expression is true (docs/expressions.md)"},
    {"partition_by", MR_PT_STRSEQ, 0, "hive partition columns (key=value directories)"},
    {"rows_per_shard", MR_PT_INT, 0, "rows per Parquet shard (default 1000000)"},
    {"row_group_rows", MR_PT_INT, 0, "rows per row group (default 131072)"},
    {"codec", MR_PT_STR, 0, "zstd (default), snappy, gzip or none"},
    {"columns", MR_PT_STRSEQ, 0, "columns to keep, in order (default: all)"},
    {NULL, 0, 0, NULL},
};

/* Values of a string-list key, borrowed from the def (caller frees the array). */
static const char **strings_of(const mr_value *def, const char *key, size_t *n)
{
    const char **arr = NULL;
    if (mr_value_strings(def, key, &arr, n) != MR_OK) *n = 0;
    return arr;
}

static mr_status bad_param(mr_error *err, const char *key, const char *fmt, const char *val)
{
    mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, fmt, val);
    mr_error_key(err, key);
    return rc;
}

typedef struct ingest_log {
    mr_op_ctx *ctx;
    uint64_t next; /* log again once this many rows are read */
} ingest_log;

static void log_progress(void *vctx, const mr_ingest_stats *st)
{
    ingest_log *l = vctx;
    if (st->rows_read < l->next) return;
    dprintf(l->ctx->log_fd, "  %llu rows read, %llu written\n", (unsigned long long)st->rows_read,
            (unsigned long long)st->rows_written);
    l->next = st->rows_read + 1000000;
}

/* Fills o from the stage definition. The arrays it allocates go to the
 * out-params (owned by the caller; strings borrowed from the def). */
static mr_status read_params(mr_op_ctx *ctx, mr_ingest_opts *o, const char ***schema_names, mr_dtype **schema_types,
                             const char ***nulls, const char ***parts, const char ***cols, mr_error *err)
{
    const mr_value *def = ctx->def, *v;
    if ((v = mr_value_get(def, "format")) && v->kind == MR_V_STR && mr_source_format_parse(v->str, &o->format) != MR_OK)
        return bad_param(err, "format", "unknown format '%s' (csv, tsv, jsonl, parquet, dataset, auto)", v->str);
    if ((v = mr_value_get(def, "delimiter")) && v->kind == MR_V_STR) {
        if (!strcmp(v->str, "\\t") || !strcasecmp(v->str, "tab") || !strcmp(v->str, "\t")) o->csv.delimiter = '\t';
        else if (strlen(v->str) == 1) o->csv.delimiter = v->str[0];
        else return bad_param(err, "delimiter", "delimiter '%s' must be one character (or \\t)", v->str);
    }
    if ((v = mr_value_get(def, "header")) && v->kind == MR_V_BOOL) o->csv.no_header = !v->u.b;
    if ((v = mr_value_get(def, "on_error")) && v->kind == MR_V_STR) {
        if (!strcmp(v->str, "fail")) o->csv.on_error = MR_ON_ERROR_FAIL;
        else if (!strcmp(v->str, "skip")) o->csv.on_error = MR_ON_ERROR_SKIP;
        else if (!strcmp(v->str, "quarantine")) o->csv.on_error = MR_ON_ERROR_QUARANTINE;
        else return bad_param(err, "on_error", "on_error '%s' must be fail, skip or quarantine", v->str);
    }
    if ((v = mr_value_get(def, "filter")) && v->kind == MR_V_STR) o->filter = v->str;
    if ((v = mr_value_get(def, "rows_per_shard")) && v->kind == MR_V_INT) {
        if (v->u.i <= 0) return bad_param(err, "rows_per_shard", "rows_per_shard must be positive%s", "");
        o->write.rows_per_shard = (size_t)v->u.i;
    }
    if ((v = mr_value_get(def, "row_group_rows")) && v->kind == MR_V_INT) {
        if (v->u.i <= 0) return bad_param(err, "row_group_rows", "row_group_rows must be positive%s", "");
        o->write.row_group_rows = (size_t)v->u.i;
    }
    if ((v = mr_value_get(def, "codec")) && v->kind == MR_V_STR) {
        if (!strcasecmp(v->str, "none")) o->write.codec = MR_PQ_UNCOMPRESSED;
        else if (mr_parquet_codec_parse(v->str, &o->write.codec) != MR_OK)
            return bad_param(err, "codec", "unknown codec '%s' (zstd, snappy, gzip, none)", v->str);
    }
    if ((v = mr_value_get(def, "schema")) && v->kind == MR_V_MAP && v->n) {
        *schema_names = mr_calloc(v->n, sizeof **schema_names);
        *schema_types = mr_calloc(v->n, sizeof **schema_types);
        if (!*schema_names || !*schema_types) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; k < v->n; k++) {
            const mr_value *t = v->items[k];
            (*schema_names)[k] = v->keys[k];
            if (t->kind != MR_V_STR || mr_dtype_parse(t->str, &(*schema_types)[k]) != MR_OK) {
                mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "schema: column '%s' has unknown type '%s'", v->keys[k],
                                      t->kind == MR_V_STR ? t->str : mr_vkind_name(t->kind));
                mr_error_hint(err, "types: bool, int64, float64, float32, string, date, timestamp");
                return rc;
            }
        }
        o->csv.schema_names = *schema_names;
        o->csv.schema_types = *schema_types;
        o->csv.n_schema = v->n;
    }
    if (mr_value_get(def, "null_values")) {
        *nulls = strings_of(def, "null_values", &o->csv.n_null_tokens);
        if (!*nulls) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        o->csv.null_tokens = *nulls;
    }
    if (mr_value_get(def, "partition_by")) {
        *parts = strings_of(def, "partition_by", &o->write.n_partition_by);
        if (!*parts) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        o->write.partition_by = *parts;
    }
    if (mr_value_get(def, "columns")) {
        *cols = strings_of(def, "columns", &o->n_columns);
        if (!*cols) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        o->columns = *cols;
    }
    return MR_OK;
}

static mr_status run_ingest(mr_op_ctx *ctx, mr_error *err)
{
    const char *source = mr_value_get(ctx->def, "source")->str;
    const char **schema_names = NULL, **nulls = NULL, **parts = NULL, **cols = NULL;
    mr_dtype *schema_types = NULL;
    char *qpath = NULL;
    mr_ingest_opts o;
    mr_ingest_opts_init(&o);
    mr_ingest_stats st;
    memset(&st, 0, sizeof st);
    mr_status rc = read_params(ctx, &o, &schema_names, &schema_types, &nulls, &parts, &cols, err);
    if (rc != MR_OK) goto done;
    if (o.csv.on_error == MR_ON_ERROR_QUARANTINE) {
        const char *dot = strrchr(source, '.');
        int jsonl = o.format == MR_SRC_JSONL ||
                    (dot && (!strcasecmp(dot, ".jsonl") || !strcasecmp(dot, ".ndjson")));
        qpath = mr_path_join(ctx->outputs[0].path, jsonl ? "quarantine.jsonl" : "quarantine.csv");
        if (!qpath) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        o.csv.quarantine_path = qpath;
    }
    o.csv.threads = ctx->threads > 0 ? ctx->threads : 0;
    o.max_rows = ctx->smoke ? SMOKE_ROWS : 0;
    ingest_log lg = {ctx, 1000000};
    o.progress = log_progress;
    o.progress_ctx = &lg;
    dprintf(ctx->log_fd, "ingesting %s%s%s%s\n", source, o.filter ? " where " : "", o.filter ? o.filter : "",
            ctx->smoke ? " [smoke: first 10000 rows]" : "");
    double t0 = mr_now();
    rc = mr_dataset_ingest(source, ctx->outputs[0].path, &o, &st, err);
    double secs = mr_now() - t0;
    if (rc != MR_OK) {
        dprintf(ctx->log_fd, "failed after %llu rows (%llu skipped)\n", (unsigned long long)st.rows_read,
                (unsigned long long)st.rows_skipped);
        goto done;
    }
    mr_op_metric(ctx, "rows_read", 0, (double)st.rows_read);
    mr_op_metric(ctx, "rows_written", 0, (double)st.rows_written);
    mr_op_metric(ctx, "rows_filtered", 0, (double)st.rows_filtered);
    mr_op_metric(ctx, "rows_skipped", 0, (double)st.rows_skipped);
    mr_op_metric(ctx, "rows_quarantined", 0, (double)st.rows_quarantined);
    mr_op_metric(ctx, "bytes_read", 0, (double)st.bytes_read);
    mr_op_metric(ctx, "shards", 0, (double)st.dataset.shards);
    mr_op_metric(ctx, "partitions", 0, (double)st.dataset.partitions);
    dprintf(ctx->log_fd,
            "ingested %llu files: %llu rows read, %llu written, %llu filtered out, %llu skipped, %llu quarantined; "
            "%llu shards, %llu partitions, %llu bytes in %.2fs\n",
            (unsigned long long)st.files, (unsigned long long)st.rows_read, (unsigned long long)st.rows_written,
            (unsigned long long)st.rows_filtered, (unsigned long long)st.rows_skipped,
            (unsigned long long)st.rows_quarantined, (unsigned long long)st.dataset.shards,
            (unsigned long long)st.dataset.partitions, (unsigned long long)st.dataset.bytes, secs);
done:
    mr_free(schema_names);
    mr_free(schema_types);
    mr_free(nulls);
    mr_free(parts);
    mr_free(cols);
    mr_free(qpath);
    return rc;
}

const mr_op mr_op_ingest = {
    .name = "ingest",
    .version = 2, /* 2: the CSV reader's default null tokens grew to pandas' set (n/a, NaN, None, -, ...) */
    .params = ingest_params,
    .outputs = NULL,
    .run = run_ingest,
};
