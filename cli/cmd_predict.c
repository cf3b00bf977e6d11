/* millrace predict BUNDLE INPUT -o OUTPUT: scores a file, a directory or a
 * dataset batch by batch (memory holds one batch: a row group or 64Ki CSV
 * rows), validating every row against the bundle's input schema. Rows that
 * fail are reported with their row numbers and either fail the run or go to
 * a quarantine file; none is dropped silently. Scoring is
 * mr_bundle_predict_table, the path serve and evaluate use too. */
#include "cli.h"
#include "millrace/bundle.h"
#include "millrace/dataset.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char predict_help[] =
    "usage: millrace predict BUNDLE INPUT -o OUTPUT [options]\n"
    "\n"
    "Scores INPUT (.csv, .tsv, .jsonl, .parquet, a dataset directory, or a directory/glob\n"
    "of such files) with BUNDLE and writes OUTPUT (.parquet, .csv or .tsv): the --id\n"
    "columns, then one `prediction` column per model output, in input row order.\n"
    "Input is streamed batch by batch, so memory stays bounded for any input size.\n"
    "\n"
    "options:\n"
    "  --id A,B,...           columns passed through from INPUT\n"
    "  --raw                  margins instead of probabilities\n"
    "  -j, --threads N        threads (default: all cores)\n"
    "  --batch-rows N         rows per batch for CSV/JSON input (default 65536)\n"
    "  --on-error MODE        fail (default): the first invalid row stops the run;\n"
    "                         quarantine: invalid rows go to --quarantine FILE (CSV:\n"
    "                         row,column,value,error) and the rest are scored\n"
    "  --quarantine FILE      where quarantined rows go (default OUTPUT.quarantine.csv)\n"
    "  --json                 print the summary as JSON\n";

typedef struct bad_rows {
    FILE *qf;           /* quarantine file, or NULL in fail mode */
    uint64_t n;         /* rows quarantined */
    mr_error *err;      /* fail mode: the first bad row */
} bad_rows;

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static void csv_field(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '"') fputc('"', f);
        fputc(s[i], f);
    }
    fputc('"', f);
}

/* Strict numeric text: the whole field must parse (surrounding blanks ok). */
static int parse_num(const char *s, size_t len, double *out)
{
    char buf[128];
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    errno = 0;
    double v = strtod(buf, &end);
    while (end && (*end == ' ' || *end == '\t')) end++;
    if (end == buf || !end || *end != '\0') return 0;
    if (!strcmp(buf, "true") || !strcmp(buf, "false")) return 0;
    *out = v;
    return 1;
}

static int parse_int(const char *s, size_t len, int64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || *end != '\0' || errno == ERANGE) return 0;
    *out = (int64_t)v;
    return 1;
}

static void str_at(const mr_column *c, size_t i, const char **s, size_t *len)
{
    const mr_column *d = c->codes ? c->dict : c;
    size_t k = c->codes ? (size_t)c->codes[i] : i;
    *s = d->bytes + d->offsets[k];
    *len = (size_t)(d->offsets[k + 1] - d->offsets[k]);
}

/* Converts a STRING column the schema wants as numbers (or integer
 * categories) into FLOAT64 / INT64, marking rows whose text does not parse.
 * Returns the new column (caller owns) or NULL on OOM. */
static mr_column *convert_column(const mr_column *c, const mr_bundle_input *in, uint8_t *bad, size_t *first_bad,
                                 mr_error *err)
{
    int want_int = in->categorical && (in->type == MR_T_INT64 || in->type == MR_T_BOOL);
    mr_column *out = NULL;
    if (mr_column_new(c->name, want_int ? MR_T_INT64 : MR_T_FLOAT64, c->n, &out, err) != MR_OK) return NULL;
    for (size_t i = 0; i < c->n; i++) {
        mr_status st;
        if (mr_column_is_null(c, i)) {
            st = mr_column_append_null(out);
        } else {
            const char *s;
            size_t len;
            str_at(c, i, &s, &len);
            double v = 0;
            int64_t iv = 0;
            int ok = want_int ? parse_int(s, len, &iv) : parse_num(s, len, &v);
            if (!ok && want_int && in->type == MR_T_BOOL) {
                ok = (len == 4 && !memcmp(s, "true", 4)) || (len == 5 && !memcmp(s, "false", 5));
                iv = len == 4;
            }
            if (!ok) {
                bad[i] = 1;
                if (*first_bad == SIZE_MAX) *first_bad = i;
                st = mr_column_append_null(out);
            } else {
                st = want_int ? mr_column_append_int64(out, iv) : mr_column_append_float64(out, v);
            }
        }
        if (st != MR_OK) {
            mr_column_free(out);
            MR_ERR(err, MR_E_NOMEM, "out of memory");
            return NULL;
        }
    }
    return out;
}

/* Validates and converts one batch in place. bad[i] = 1 for rows that fail;
 * they are reported (fail mode: the error names the first; quarantine mode:
 * one line per bad field). row0: 1-based number of the batch's first row. */
static mr_status validate_batch(const mr_bundle *b, mr_table *t, uint64_t row0, uint8_t *bad, bad_rows *br,
                                const char *input, mr_error *err)
{
    for (size_t j = 0; j < t->n_cols; j++) {
        mr_column *c = t->cols[j];
        ssize_t ii = mr_bundle_input_index(b, c->name);
        if (ii < 0) continue;
        const mr_bundle_input *in = mr_bundle_input_at(b, (size_t)ii);
        int numeric_ok = c->type == MR_T_BOOL || c->type == MR_T_INT64 || c->type == MR_T_FLOAT64 ||
                         c->type == MR_T_FLOAT32 || c->type == MR_T_NULL;
        if (c->type != MR_T_STRING || (in->categorical && in->type == MR_T_STRING)) {
            if (in->categorical ? c->type == MR_T_FLOAT64 || c->type == MR_T_FLOAT32 : !numeric_ok) {
                MR_ERR(err, MR_E_SCHEMA, "%s: column '%s' has type %s; the bundle expects %s", input, c->name,
                       mr_dtype_name(c->type), in->categorical ? "a category" : "a number");
                mr_error_key(err, c->name);
                return MR_E_SCHEMA;
            }
            continue;
        }
        size_t first_bad = SIZE_MAX;
        uint8_t *col_bad = mr_calloc(t->n_rows ? t->n_rows : 1, 1);
        if (!col_bad) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_column *conv = convert_column(c, in, col_bad, &first_bad, err);
        if (!conv) {
            mr_free(col_bad);
            return MR_E_NOMEM;
        }
        if (first_bad != SIZE_MAX) {
            for (size_t i = first_bad; i < t->n_rows; i++) {
                if (!col_bad[i]) continue;
                const char *s;
                size_t len;
                str_at(c, i, &s, &len);
                if (!br->qf) {
                    MR_ERR(err, MR_E_PARSE, "%s: row %llu: column '%s': expected %s, got \"%.*s\"", input,
                           (unsigned long long)(row0 + i), c->name, in->categorical ? "an integer category" : "a number",
                           (int)(len > 64 ? 64 : len), s);
                    mr_error_key(err, c->name);
                    mr_error_hint(err, "--on-error quarantine writes invalid rows to a file and scores the rest");
                    mr_free(col_bad);
                    mr_column_free(conv);
                    return MR_E_PARSE;
                }
                fprintf(br->qf, "%llu,", (unsigned long long)(row0 + i));
                csv_field(br->qf, c->name, strlen(c->name));
                fputc(',', br->qf);
                csv_field(br->qf, s, len);
                fprintf(br->qf, ",%s\n", in->categorical ? "expected an integer category" : "expected a number");
                bad[i] = 1;
            }
        }
        mr_free(col_bad);
        mr_column_free(c);
        t->cols[j] = conv;
    }
    return MR_OK;
}

/* ---- output: Parquet (streaming writer) or CSV (our own streaming writer) ---- */

typedef struct out_sink {
    const char *path;
    char *tmp;
    mr_parquet_writer *pq;
    FILE *csv;
    char delim;
    int header_done;
} out_sink;

static mr_status sink_open(out_sink *o, const char *path, mr_error *err)
{
    memset(o, 0, sizeof(*o));
    o->path = path;
    o->tmp = mr_asprintf("%s.tmp.%ld", path, (long)getpid());
    if (!o->tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (ends_with(path, ".parquet")) return mr_parquet_writer_open(o->tmp, NULL, &o->pq, err);
    if (!ends_with(path, ".csv") && !ends_with(path, ".tsv"))
        return MR_ERR(err, MR_E_INVALID_ARG, "%s: output must end in .parquet, .csv or .tsv", path);
    o->delim = ends_with(path, ".tsv") ? '\t' : ',';
    o->csv = fopen(o->tmp, "wb");
    if (!o->csv) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", o->tmp);
    return MR_OK;
}

static mr_status sink_write(out_sink *o, const mr_table *t, mr_error *err)
{
    if (o->pq) return mr_parquet_writer_write(o->pq, t, err);
    if (!o->header_done) {
        for (size_t j = 0; j < t->n_cols; j++) fprintf(o->csv, "%s%s", j ? (o->delim == ',' ? "," : "\t") : "", t->cols[j]->name);
        fputc('\n', o->csv);
        o->header_done = 1;
    }
    mr_buf b;
    mr_buf_init(&b);
    for (size_t i = 0; i < t->n_rows; i++) {
        for (size_t j = 0; j < t->n_cols; j++) {
            const mr_column *c = t->cols[j];
            if (j) fputc(o->delim, o->csv);
            if (mr_column_is_null(c, i)) continue;
            b.len = 0;
            if (mr_column_format(c, i, &b) != MR_OK) {
                mr_buf_free(&b);
                return MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
            int quote = c->type == MR_T_STRING && (memchr(b.data, o->delim, b.len) || memchr(b.data, '"', b.len) ||
                                                   memchr(b.data, '\n', b.len) || memchr(b.data, '\r', b.len));
            if (quote) csv_field(o->csv, b.data, b.len);
            else fwrite(b.data, 1, b.len, o->csv);
        }
        fputc('\n', o->csv);
    }
    mr_buf_free(&b);
    if (ferror(o->csv)) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", o->tmp);
    return MR_OK;
}

static mr_status sink_close(out_sink *o, int ok, mr_error *err)
{
    mr_status rc = MR_OK;
    if (o->pq) {
        if (ok) rc = mr_parquet_writer_close(o->pq, err);
        else mr_parquet_writer_free(o->pq);
        o->pq = NULL;
    }
    if (o->csv) {
        if (fflush(o->csv) != 0 || fsync(fileno(o->csv)) != 0) rc = ok ? MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", o->tmp) : rc;
        fclose(o->csv);
        o->csv = NULL;
    }
    if (ok && rc == MR_OK && o->tmp && rename(o->tmp, o->path) != 0)
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rename into place", o->path);
    if ((!ok || rc != MR_OK) && o->tmp) unlink(o->tmp);
    mr_free(o->tmp);
    o->tmp = NULL;
    return rc;
}


/* For CSV/TSV inputs: the bundle inputs present in the header, declared
 * STRING so that every value reaches validation as its original text. */
static mr_status csv_schema(const mr_bundle *b, const char *path, char delim, const char ***names, mr_dtype **types,
                            size_t *n, mr_error *err)
{
    mr_csv_options o;
    mr_csv_options_init(&o);
    o.delimiter = delim;
    o.sample_rows = 1;
    mr_csv_reader *r = NULL;
    mr_status rc = mr_csv_reader_open(path, &o, &r, err);
    if (rc != MR_OK) return rc;
    *names = mr_calloc(mr_bundle_n_inputs(b) + 1, sizeof(char *));
    *types = mr_calloc(mr_bundle_n_inputs(b) + 1, sizeof(mr_dtype));
    *n = 0;
    if (!*names || !*types) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < mr_bundle_n_inputs(b); i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        for (size_t j = 0; j < mr_csv_reader_n_cols(r); j++)
            if (!strcmp(mr_csv_reader_col_name(r, j), in->name)) {
                (*names)[*n] = in->name;
                (*types)[(*n)++] = MR_T_STRING;
            }
    }
    mr_csv_reader_close(r, NULL);
    return rc;
}

int cmd_predict(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(predict_help, stdout);
        return EXIT_OK;
    }
    const char *bundle_path = NULL, *input = NULL, *output = NULL, *qpath = NULL, *on_error = "fail";
    char **ids = NULL;
    size_t n_ids = 0, batch_rows = 65536;
    int raw = 0, json = 0, threads = 0, rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) output = v;
        else if (!strcmp(a, "--id")) {
            if (v) ids = cli_split_list(v, &n_ids);
        } else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) threads = v ? (int)strtol(v, NULL, 10) : 0;
        else if (!strcmp(a, "--batch-rows")) batch_rows = v ? (size_t)strtoull(v, NULL, 10) : 0;
        else if (!strcmp(a, "--on-error")) on_error = v;
        else if (!strcmp(a, "--quarantine")) qpath = v;
        else {
            takes = 0;
            if (!strcmp(a, "--raw")) raw = 1;
            else if (!strcmp(a, "--json")) json = 1;
            else if (a[0] == '-' && a[1]) rc = cli_usage_error("predict", "unknown option '%s'", a);
            else if (!bundle_path) bundle_path = a;
            else if (!input) input = a;
            else rc = cli_usage_error("predict", "unexpected argument '%s'", a);
        }
        if (takes) {
            if (!v) rc = cli_usage_error("predict", "option '%s' needs a value", a);
            i++;
        }
    }
    if (rc == EXIT_OK && (!bundle_path || !input || !output)) rc = cli_usage_error("predict", "expected BUNDLE INPUT -o OUTPUT");
    if (rc == EXIT_OK && on_error && strcmp(on_error, "fail") && strcmp(on_error, "quarantine"))
        rc = cli_usage_error("predict", "--on-error takes fail or quarantine, not '%s'", on_error);
    if (rc == EXIT_OK && (batch_rows == 0 || threads < 0)) rc = cli_usage_error("predict", "--batch-rows and -j take positive numbers");
    if (rc != EXIT_OK) {
        cli_free_list(ids);
        return rc;
    }
    int quarantine = !strcmp(on_error, "quarantine");
    char *qdefault = quarantine && !qpath ? mr_asprintf("%s.quarantine.csv", output) : NULL;
    if (qdefault) qpath = qdefault;

    mr_error err;
    mr_error_init(&err);
    mr_bundle *b = NULL;
    mr_source *src = NULL;
    mr_table *batch = NULL, *good = NULL, *res = NULL;
    double *pred = NULL;
    uint8_t *bad = NULL;
    uint32_t *keep = NULL;
    const char **snames = NULL;
    mr_dtype *stypes = NULL;
    size_t n_schema = 0;
    out_sink sink;
    int sink_opened = 0;
    bad_rows br = {0};
    uint64_t rows_in = 0, rows_out = 0;
    double predict_s = 0; /* time inside mr_bundle_predict_table */
    double t0 = mr_now();
    mr_status st = mr_bundle_load(bundle_path, &b, &err);
    if (st == MR_OK) st = mr_pool_init(threads, &err);
    int is_csv = ends_with(input, ".csv") || ends_with(input, ".tsv");
    mr_csv_options co;
    mr_csv_options_init(&co);
    if (st == MR_OK && is_csv) {
        st = csv_schema(b, input, ends_with(input, ".tsv") ? '\t' : ',', &snames, &stypes, &n_schema, &err);
        co.schema_names = snames;
        co.schema_types = stypes;
        co.n_schema = n_schema;
    }
    if (st == MR_OK) st = mr_source_open(input, MR_SRC_AUTO, is_csv ? &co : NULL, &src, &err);
    if (st == MR_OK && quarantine) {
        br.qf = fopen(qpath, "wb");
        if (!br.qf) st = MR_ERR_SYS(&err, MR_E_IO, errno, "%s: cannot create quarantine file", qpath);
        else fputs("row,column,value,error\n", br.qf);
    }
    if (st == MR_OK) {
        st = sink_open(&sink, output, &err);
        sink_opened = 1;
    }
    while (st == MR_OK) {
        st = mr_source_next(src, batch_rows, &batch, &err);
        if (st != MR_OK || !batch) break;
        size_t n = batch->n_rows;
        bad = mr_calloc(n ? n : 1, 1);
        keep = mr_malloc((n ? n : 1) * sizeof(uint32_t));
        if (!bad || !keep) {
            st = MR_ERR(&err, MR_E_NOMEM, "out of memory");
            break;
        }
        st = validate_batch(b, batch, rows_in + 1, bad, &br, input, &err);
        size_t n_keep = 0;
        for (size_t i = 0; st == MR_OK && i < n; i++) {
            if (bad[i]) br.n++;
            else keep[n_keep++] = (uint32_t)i;
        }
        if (st == MR_OK && n_keep < n) st = mr_table_take(batch, keep, n_keep, &good, &err);
        const mr_table *use = good ? good : batch;
        size_t k = 0;
        double tp = mr_now();
        if (st == MR_OK) st = mr_bundle_predict_table(b, use, raw, threads, &pred, &k, &err);
        predict_s += mr_now() - tp;
        if (st == MR_OK) st = mr_table_new(&res, &err);
        for (size_t q = 0; st == MR_OK && q < n_ids; q++) {
            const mr_column *c = mr_table_column(use, ids[q]);
            mr_column *copy = NULL;
            if (!c) {
                st = MR_ERR(&err, MR_E_NOT_FOUND, "--id column '%s' is not in %s", ids[q], input);
                break;
            }
            st = mr_column_slice(c, 0, c->n, &copy, &err);
            if (st == MR_OK) st = mr_table_add_column(res, copy, &err);
        }
        for (size_t q = 0; st == MR_OK && q < k; q++) {
            mr_column *c = NULL;
            st = mr_column_new(mr_bundle_output_name(b, q), MR_T_FLOAT64, use->n_rows, &c, &err);
            for (size_t r = 0; st == MR_OK && r < use->n_rows; r++) st = mr_column_append_float64(c, pred[r * k + q]);
            if (st == MR_OK) st = mr_table_add_column(res, c, &err);
            else mr_column_free(c);
        }
        if (st == MR_OK && res->n_cols) res->n_rows = use->n_rows;
        if (st == MR_OK && use->n_rows) st = sink_write(&sink, res, &err);
        rows_in += n;
        rows_out += use->n_rows;
        mr_free(pred);
        pred = NULL;
        mr_table_free(res);
        res = NULL;
        mr_table_free(good);
        good = NULL;
        mr_table_free(batch);
        batch = NULL;
        mr_free(bad);
        bad = NULL;
        mr_free(keep);
        keep = NULL;
    }
    if (st == MR_OK && rows_out == 0 && sink.csv && !sink.header_done) {
        for (size_t q = 0; q < n_ids; q++) fprintf(sink.csv, "%s%s", q ? "," : "", ids[q]);
        for (size_t q = 0; q < mr_bundle_n_outputs(b); q++)
            fprintf(sink.csv, "%s%s", q || n_ids ? "," : "", mr_bundle_output_name(b, q));
        fputc('\n', sink.csv);
    }
    if (sink_opened) {
        mr_status cst = sink_close(&sink, st == MR_OK, &err);
        if (st == MR_OK) st = cst;
    }
    if (br.qf && fclose(br.qf) != 0 && st == MR_OK) st = MR_ERR_SYS(&err, MR_E_IO, errno, "%s: write failed", qpath);
    if (st != MR_OK) {
        if (!err.file[0] && st != MR_E_PARSE) mr_error_at(&err, input, 0, 0);
        mr_log_error(&err);
        rc = st == MR_E_INVALID_ARG || st == MR_E_SCHEMA || st == MR_E_NOT_FOUND ? EXIT_USAGE : EXIT_FAILED;
    } else {
        double secs = mr_now() - t0;
        if (json)
            printf("{\"rows\": %llu, \"scored\": %llu, \"quarantined\": %llu, \"output\": \"%s\", \"seconds\": %.6f, "
                   "\"predict_seconds\": %.6f}\n",
                   (unsigned long long)rows_in, (unsigned long long)rows_out, (unsigned long long)br.n, output, secs,
                   predict_s);
        else
            printf("scored %llu of %llu rows in %.3fs -> %s\n", (unsigned long long)rows_out,
                   (unsigned long long)rows_in, secs, output);
        if (br.n)
            fprintf(stderr, "millrace: warning: %llu invalid row%s quarantined -> %s\n", (unsigned long long)br.n,
                    br.n == 1 ? "" : "s", qpath);
    }
    mr_source_close(src, NULL);
    mr_table_free(batch);
    mr_table_free(good);
    mr_table_free(res);
    mr_free(pred);
    mr_free(bad);
    mr_free(keep);
    mr_free((void *)snames);
    mr_free(stypes);
    mr_bundle_free(b);
    mr_free(qdefault);
    cli_free_list(ids);
    return rc;
}
