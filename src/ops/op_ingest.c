/* The ingest op: reads a source (a file, a glob, a directory of files, a
 * dataset, or ${stages.X}) and writes it as a dataset (Parquet shards +
 * manifest.json) into the stage's output, with an optional declared schema,
 * row filter, column subset and hive partitioning. Bad rows fail the stage,
 * or are skipped / quarantined and counted; quarantined rows are kept inside
 * the artifact (quarantine.csv or quarantine.jsonl next to manifest.json). */
#include "millrace/dataset.h"
#include "millrace/expr.h"
#include "millrace/op.h"
#include "ops_int.h"

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define SMOKE_ROWS 10000u

static const mr_param_def ingest_params[] = {
    {"source", MR_PT_STR | MR_PT_PATH, 0, "file, glob, directory of files, dataset, or ${stages.X} (or files:)"},
    {"files", MR_PT_STR | MR_PT_PATH, 0, "files to pack one per row, e.g. images/**/*.jpg (docs/data.md, Files into shards)"},
    {"column", MR_PT_STR, 0, "with files: the bytes column (default image)"},
    {"label_from", MR_PT_STR, 0, "with files: parent-dir (label = the file's folder name)"},
    {"labels", MR_PT_STR | MR_PT_PATH, 0, "with files: CSV/Parquet with a path column, joined to the files"},
    {"shuffle_seed", MR_PT_INT, 0, "with files: rows in a random order fixed by this seed, not by path"},
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
    {"row_group_bytes", MR_PT_INT, 0, "a row group also ends at the row that brings its values to this many bytes (default 134217728)"},
    {"codec", MR_PT_STR, 0, "zstd (default), snappy, gzip or none"},
    {"columns", MR_PT_STRSEQ, 0, "columns to keep, in order (default: all)"},
    {NULL, 0, 0, NULL},
};

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

/* What the options point into besides the definition (owned; strings are
 * borrowed from the def). */
typedef struct ingest_arrays {
    const char **schema_names;
    mr_dtype *schema_types;
    mr_colkind *schema_kinds;
    const char **nulls, **parts, **cols;
} ingest_arrays;

static void ingest_arrays_free(ingest_arrays *a)
{
    mr_free(a->schema_names);
    mr_free(a->schema_types);
    mr_free(a->schema_kinds);
    mr_free(a->nulls);
    mr_free(a->parts);
    mr_free(a->cols);
    memset(a, 0, sizeof(*a));
}

/* An unknown name among choices, at v, with did-you-mean or the choices. */
static mr_status bad_choice(mr_error *err, const mr_value *v, const char *key, const char *const *choices, size_t n)
{
    char list[256];
    size_t off = 0;
    list[0] = '\0';
    for (size_t k = 0; k < n && off < sizeof(list); k++) {
        int w = snprintf(list + off, sizeof(list) - off, "%s%s", k ? ", " : "", choices[k]);
        if (w > 0) off += (size_t)w;
    }
    mr_status rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "unknown %s '%s' (expected %s)", key, v->str, list);
    mr_error_key(err, key);
    const char *best = mr_closest(v->str, choices, n);
    if (best) mr_error_hint(err, "did you mean '%s'?", best);
    return rc;
}

/* A list of names (columns, partition_by): strings, none empty or twice. */
static mr_status names_of(const mr_value *def, const char *key, const char ***out, size_t *n_out, mr_error *err)
{
    const mr_value *v = mr_value_get(def, key);
    size_t n = v->kind == MR_V_SEQ ? v->n : 1;
    for (size_t k = 0; k < n; k++) {
        const mr_value *it = v->kind == MR_V_SEQ ? v->items[k] : v;
        if (it->kind != MR_V_STR || !it->str[0])
            return mr_error_set_at(err, NULL, it->line, it->col, MR_E_INVALID_ARG, "'%s' lists column names, got %s", key,
                               it->kind == MR_V_STR ? "an empty string" : mr_vkind_name(it->kind));
        for (size_t q = 0; q < k; q++)
            if (!strcmp(v->items[q]->str, it->str))
                return mr_error_set_at(err, NULL, it->line, it->col, MR_E_INVALID_ARG, "'%s' lists column '%s' twice", key, it->str);
    }
    if (mr_value_strings(def, key, out, n_out) != MR_OK || !*out) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    return MR_OK;
}

/* The definition's settings, into o: format, CSV options (delimiter,
 * header, null tokens, declared schema, bad rows), filter (its syntax),
 * columns, partitioning and the writer's sizes and codec. The arrays o
 * points to go to a (caller frees with ingest_arrays_free). What validate
 * checks at load is what run uses; the source's columns are checked when
 * it is read. */
static mr_status ingest_settings(const mr_value *def, mr_ingest_opts *o, ingest_arrays *a, mr_error *err)
{
    static const char *const formats[] = {"csv", "tsv", "jsonl", "parquet", "dataset", "webdataset", "auto"};
    static const char *const on_errors[] = {"fail", "skip", "quarantine"};
    static const char *const codecs[] = {"zstd", "snappy", "gzip", "lz4_raw", "none"};
    const mr_value *v;
    mr_status rc;
    memset(a, 0, sizeof(*a));
    mr_ingest_opts_init(o);
    if ((v = mr_value_get(def, "format")) && v->kind == MR_V_STR && mr_source_format_parse(v->str, &o->format) != MR_OK)
        return bad_choice(err, v, "format", formats, 7);
    if ((v = mr_value_get(def, "delimiter")) && v->kind == MR_V_STR) {
        if (!strcmp(v->str, "\\t") || !strcasecmp(v->str, "tab") || !strcmp(v->str, "\t")) o->csv.delimiter = '\t';
        else if (strlen(v->str) == 1 && v->str[0] != '"' && v->str[0] != '\n' && v->str[0] != '\r') o->csv.delimiter = v->str[0];
        else {
            rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG,
                             "delimiter '%s' must be one character (or \\t), not a quote or line break", v->str);
            mr_error_key(err, "delimiter");
            mr_error_hint(err, "delimiter: \";\", delimiter: \"|\" or delimiter: tab");
            return rc;
        }
    }
    if ((v = mr_value_get(def, "header")) && v->kind == MR_V_BOOL) o->csv.no_header = !v->u.b;
    if ((v = mr_value_get(def, "on_error")) && v->kind == MR_V_STR) {
        if (!strcmp(v->str, "fail")) o->csv.on_error = MR_ON_ERROR_FAIL;
        else if (!strcmp(v->str, "skip")) o->csv.on_error = MR_ON_ERROR_SKIP;
        else if (!strcmp(v->str, "quarantine")) o->csv.on_error = MR_ON_ERROR_QUARANTINE;
        else return bad_choice(err, v, "on_error", on_errors, 3);
    }
    if ((v = mr_value_get(def, "filter")) && v->kind == MR_V_STR) {
        o->filter = v->str;
        mr_expr *e = NULL;
        rc = mr_expr_parse(v->str, strlen(v->str), "filter", &e, err);
        mr_expr_free(e);
        if (rc != MR_OK) {
            /* the message names the column inside the expression; the position is the YAML value's */
            if (err && !err->line) {
                err->line = v->line;
                err->col = v->col;
            }
            mr_error_key(err, "filter");
            return rc;
        }
    }
    static const char *const size_keys[] = {"rows_per_shard", "row_group_rows", "row_group_bytes"};
    size_t *size_dst[] = {&o->write.rows_per_shard, &o->write.row_group_rows, &o->write.row_group_bytes};
    for (size_t k = 0; k < 3; k++) {
        if (!(v = mr_value_get(def, size_keys[k])) || v->kind != MR_V_INT) continue;
        if (v->u.i <= 0) {
            rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "%s must be positive, got %lld", size_keys[k],
                             (long long)v->u.i);
            mr_error_key(err, size_keys[k]);
            return rc;
        }
        *size_dst[k] = (size_t)v->u.i;
    }
    if ((v = mr_value_get(def, "codec")) && v->kind == MR_V_STR) {
        if (!strcasecmp(v->str, "none")) o->write.codec = MR_PQ_UNCOMPRESSED;
        else if (mr_parquet_codec_parse(v->str, &o->write.codec) != MR_OK) return bad_choice(err, v, "codec", codecs, 5);
    }
    if ((v = mr_value_get(def, "schema")) && v->kind == MR_V_MAP && v->n) {
        a->schema_names = mr_calloc(v->n, sizeof *a->schema_names);
        a->schema_types = mr_calloc(v->n, sizeof *a->schema_types);
        a->schema_kinds = mr_calloc(v->n, sizeof *a->schema_kinds);
        if (!a->schema_names || !a->schema_types || !a->schema_kinds) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; k < v->n; k++) {
            static const char *const types[] = {"bool",   "int64",     "float64", "float32", "string",          "date",
                                                "timestamp", "integer", "int",   "float",   "double",  "boolean",
                                                "datetime",  "int8",    "int16", "int32",   "uint8",   "uint16",
                                                "uint32",    "uint64",  "binary", "timestamp_local"};
            const mr_value *t = v->items[k];
            a->schema_names[k] = v->keys[k];
            if (t->kind != MR_V_STR || mr_kind_parse(t->str, &a->schema_types[k], &a->schema_kinds[k]) != MR_OK) {
                rc = mr_error_set_at(err, NULL, t->line, t->col, MR_E_INVALID_ARG, "schema: column '%s' has unknown type '%s'",
                                 v->keys[k], t->kind == MR_V_STR ? t->str : mr_vkind_name(t->kind));
                const char *best = t->kind == MR_V_STR ? mr_closest(t->str, types, sizeof(types) / sizeof(*types)) : NULL;
                if (best) mr_error_hint(err, "did you mean '%s'? types: %s", best, MR_SCHEMA_TYPE_NAMES);
                else mr_error_hint(err, "types: %s", MR_SCHEMA_TYPE_NAMES);
                return rc;
            }
        }
        o->csv.schema_names = a->schema_names;
        o->csv.schema_types = a->schema_types;
        o->csv.schema_kinds = a->schema_kinds;
        o->csv.n_schema = v->n;
    }
    if ((v = mr_value_get(def, "null_values"))) {
        char delim = o->csv.delimiter ? o->csv.delimiter : ',';
        size_t n = v->kind == MR_V_SEQ ? v->n : 1;
        for (size_t k = 0; k < n; k++) {
            const mr_value *it = v->kind == MR_V_SEQ ? v->items[k] : v;
            if (it->kind != MR_V_STR) continue; /* the engine refused it */
            if (strchr(it->str, delim) || strpbrk(it->str, "\r\n")) {
                rc = mr_error_set_at(err, NULL, it->line, it->col, MR_E_INVALID_ARG,
                                 "null_values: token \"%s\" holds %s, so no unquoted field can equal it", it->str,
                                 strchr(it->str, delim) ? "the delimiter" : "a line break");
                mr_error_key(err, "null_values");
                return rc;
            }
        }
        if (mr_value_strings(def, "null_values", &a->nulls, &o->csv.n_null_tokens) != MR_OK || !a->nulls)
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
        o->csv.null_tokens = a->nulls;
    }
    if (mr_value_get(def, "columns")) {
        if ((rc = names_of(def, "columns", &a->cols, &o->n_columns, err)) != MR_OK) return rc;
        o->columns = a->cols;
    }
    if ((v = mr_value_get(def, "partition_by"))) {
        if ((rc = names_of(def, "partition_by", &a->parts, &o->write.n_partition_by, err)) != MR_OK) return rc;
        o->write.partition_by = a->parts;
        if (o->write.n_partition_by > MR_DATASET_MAX_PARTITION_COLS)
            return mr_error_set_at(err, NULL, v->line, v->col, MR_E_INVALID_ARG, "partition_by: at most %d columns, got %zu",
                               MR_DATASET_MAX_PARTITION_COLS, o->write.n_partition_by);
        for (size_t k = 0; o->columns && k < o->write.n_partition_by; k++) {
            size_t q = 0;
            while (q < o->n_columns && strcmp(o->columns[q], a->parts[k])) q++;
            if (q < o->n_columns) continue;
            const mr_value *it = v->kind == MR_V_SEQ ? v->items[k] : v;
            rc = mr_error_set_at(err, NULL, it->line, it->col, MR_E_INVALID_ARG,
                             "partition column '%s' is not among the columns kept ('columns')", a->parts[k]);
            mr_error_hint(err, "add '%s' to columns, or partition by a kept column", a->parts[k]);
            return rc;
        }
    }
    return MR_OK;
}

/* source: or files: (exactly one), and the keys that go with each. */
static mr_status check_mode(const mr_value *def, mr_error *err)
{
    const mr_value *src = mr_value_get(def, "source"), *files = mr_value_get(def, "files");
    if (!src == !files) {
        const mr_value *at = src ? src : def;
        mr_status rc = mr_error_set_at(err, NULL, at->line, at->col, MR_E_SCHEMA,
                                       src ? "give source or files, not both" : "missing source (or files)");
        mr_error_key(err, src ? "files" : "source");
        mr_error_hint(err, "source: data/train.csv reads rows; files: 'images/**/*.jpg' packs one file per row");
        return rc;
    }
    static const char *const file_keys[] = {"column", "label_from", "labels", "shuffle_seed"};
    static const char *const row_keys[] = {"format", "schema", "delimiter", "header", "null_values",
                                           "filter", "partition_by", "columns"};
    const char *const *bad = files ? row_keys : file_keys;
    size_t n_bad = files ? 8 : 4;
    for (size_t k = 0; k < n_bad; k++) {
        const mr_value *v = mr_value_get(def, bad[k]);
        if (!v) continue;
        mr_status rc = mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "%s does not go with %s", bad[k],
                                       files ? "files" : "source");
        mr_error_key(err, bad[k]);
        return rc;
    }
    const mr_value *lf = mr_value_get(def, "label_from");
    if (lf && lf->kind == MR_V_STR && strcmp(lf->str, "parent-dir")) {
        mr_status rc = mr_error_set_at(err, NULL, lf->line, lf->col, MR_E_SCHEMA,
                                       "label_from must be parent-dir, got '%s'", lf->str);
        mr_error_key(err, "label_from");
        return rc;
    }
    const mr_value *ss = mr_value_get(def, "shuffle_seed");
    if (ss && ss->kind == MR_V_INT && ss->u.i < 0) {
        mr_status rc = mr_error_set_at(err, NULL, ss->line, ss->col, MR_E_SCHEMA,
                                       "shuffle_seed must be an integer >= 0, got %lld", (long long)ss->u.i);
        mr_error_key(err, "shuffle_seed");
        return rc;
    }
    const mr_value *oe = mr_value_get(def, "on_error");
    if (files && oe && oe->kind == MR_V_STR && !strcmp(oe->str, "quarantine")) {
        mr_status rc = mr_error_set_at(err, NULL, oe->line, oe->col, MR_E_SCHEMA,
                                       "on_error: quarantine does not go with files (skip leaves a file out)");
        mr_error_key(err, "on_error");
        return rc;
    }
    return MR_OK;
}

static mr_status validate_ingest(const mr_op_validate_ctx *vc, mr_error *err)
{
    mr_ingest_opts o;
    ingest_arrays a;
    mr_status rc = check_mode(vc->def, err);
    if (rc != MR_OK) return rc;
    rc = ingest_settings(vc->def, &o, &a, err);
    ingest_arrays_free(&a);
    return rc;
}

/* Removes the work of this stage's earlier keys (their inputs changed since a run was killed):
 * the caller holds the stage's lock, so no runner uses them. */
static void drop_stale_work(const char *workspace, const char *stage, const char *keep)
{
    char *parent = mr_asprintf("%s/.millrace/partial", workspace);
    DIR *d = parent ? opendir(parent) : NULL;
    size_t sl = strlen(stage);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, stage, sl) || e->d_name[sl] != '@') continue;
        char *p = mr_path_join(parent, e->d_name);
        if (p && strcmp(p, keep) && mr_fs_is_dir(p)) mr_fs_rmtree(p, NULL);
        mr_free(p);
    }
    if (d) closedir(d);
    mr_free(parent);
}

/* files: one row per file. The finished shards are kept in
 * .millrace/partial/STAGE@KEY (while STAGE.lock is held), so a killed run of the same stage and
 * inputs continues after them; a runner that finds the lock held works in its private tmp. */
static mr_status run_files(mr_op_ctx *ctx, const mr_ingest_opts *io, mr_error *err)
{
    const char *pattern = mr_value_get(ctx->def, "files")->str;
    const mr_value *v;
    mr_files_opts fo;
    mr_files_opts_init(&fo);
    fo.write = io->write;
    fo.on_error = io->csv.on_error;
    fo.threads = ctx->threads > 0 ? ctx->threads : 0;
    if ((v = mr_value_get(ctx->def, "column")) && v->kind == MR_V_STR) fo.column = v->str;
    if ((v = mr_value_get(ctx->def, "labels")) && v->kind == MR_V_STR) fo.labels = v->str;
    if ((v = mr_value_get(ctx->def, "label_from")) && v->kind == MR_V_STR) fo.label_from = MR_LABEL_PARENT_DIR;
    if ((v = mr_value_get(ctx->def, "shuffle_seed")) && v->kind == MR_V_INT) {
        fo.shuffle = 1;
        fo.shuffle_seed = (uint64_t)v->u.i;
    }
    char key[17];
    snprintf(key, sizeof key, "%s", ctx->stage_key ? ctx->stage_key : "nokey");
    char *work = mr_asprintf("%s/.millrace/partial/%s@%s", ctx->workspace, ctx->stage, key); /* no stage name has @ */
    char *lock = mr_asprintf("%s/.millrace/partial/%s.lock", ctx->workspace, ctx->stage); /* one per stage */
    char *priv = ctx->tmp_dir ? mr_path_join(ctx->tmp_dir, "files-work") : NULL;
    mr_flock lk = {-1, NULL};
    mr_status rc = work && lock && priv ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        char *parent = mr_asprintf("%s/.millrace/partial", ctx->workspace);
        rc = parent ? mr_fs_mkdirs(parent, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(parent);
    }
    if (rc == MR_OK) {
        mr_status lrc = mr_flock_acquire(&lk, lock, MR_LOCK_EXCLUSIVE, 0, 0, NULL);
        fo.work = lrc == MR_OK ? work : priv;
        if (lrc == MR_OK) drop_stale_work(ctx->workspace, ctx->stage, work);
    }
    mr_files_stats st;
    memset(&st, 0, sizeof st);
    double t0 = mr_now();
    if (rc == MR_OK) {
        dprintf(ctx->log_fd, "packing %s\n", pattern);
        rc = mr_files_ingest(pattern, ctx->outputs[0].path, &fo, &st, err);
    }
    double secs = mr_now() - t0;
    for (uint64_t i = 0; i < st.files_skipped; i++) dprintf(ctx->log_fd, "skipped %s\n", st.skipped[i]);
    if (rc == MR_OK) {
        mr_op_metric(ctx, "files", 0, (double)st.files);
        mr_op_metric(ctx, "rows_written", 0, (double)st.rows_written);
        mr_op_metric(ctx, "files_skipped", 0, (double)st.files_skipped);
        mr_op_metric(ctx, "labels_missing", 0, (double)st.labels_missing);
        mr_op_metric(ctx, "bytes_read", 0, (double)st.bytes_read);
        mr_op_metric(ctx, "shards", 0, (double)st.dataset.shards);
        dprintf(ctx->log_fd, "packed %llu of %llu files (%llu skipped, %llu without labels) into %llu shards, "
                             "%llu bytes, in %.2fs%s\n",
                (unsigned long long)st.rows_written, (unsigned long long)st.files,
                (unsigned long long)st.files_skipped, (unsigned long long)st.labels_missing,
                (unsigned long long)st.dataset.shards, (unsigned long long)st.dataset.bytes, secs,
                st.shards_resumed ? "; resumed an interrupted run" : "");
    }
    mr_files_stats_free(&st);
    mr_flock_release(&lk); /* the lock file stays: unlinking it would race a waiting runner */
    mr_free(work);
    mr_free(lock);
    mr_free(priv);
    return rc;
}

static mr_status run_ingest(mr_op_ctx *ctx, mr_error *err)
{
    ingest_arrays a;
    char *qpath = NULL;
    mr_ingest_opts o;
    mr_ingest_stats st;
    memset(&st, 0, sizeof st);
    mr_status rc = check_mode(ctx->def, err);
    if (rc != MR_OK) return rc;
    rc = ingest_settings(ctx->def, &o, &a, err);
    if (rc != MR_OK) goto done;
    if (mr_value_get(ctx->def, "files")) {
        rc = run_files(ctx, &o, err);
        goto done;
    }
    const char *source = mr_value_get(ctx->def, "source")->str;
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
    /* an s3:// source is read as the version the stage's key was computed from */
    for (size_t k = 0; !strncmp(source, "s3://", 5) && k < ctx->n_inputs; k++)
        if (ctx->inputs[k].path && !strcmp(ctx->inputs[k].path, source) && ctx->inputs[k].id &&
            !strncmp(ctx->inputs[k].id, "s3", 2))
            o.s3_version = ctx->inputs[k].id;
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
    ingest_arrays_free(&a);
    mr_free(qpath);
    return rc;
}

const mr_op mr_op_ingest = {
    .name = "ingest",
    .version = 4, /* 2: the CSV reader's default null tokens grew to pandas' set (n/a, NaN, None, -, ...);
                     3: exact types (column kinds: int widths, decimals, binary, naive timestamps);
                     4: row groups also end at 128 MiB of values (row_group_bytes)
                     (files: is new; source: stages keep their version) */
    .params = ingest_params,
    .outputs = NULL,
    .run = run_ingest,
    .validate = validate_ingest,
};
