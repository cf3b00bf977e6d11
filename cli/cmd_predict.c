/* millrace predict BUNDLE INPUT -o OUTPUT: scores a file, a directory or a
 * dataset batch by batch (memory holds one batch: a row group or 64Ki CSV
 * rows), validating every row against the bundle's input schema. Rows that
 * fail are reported with their row numbers and either fail the run or go to
 * a quarantine file; none is dropped silently. Values are checked and
 * converted by the bundle's own rules (mr_bundle_conform_table, the ones
 * serve uses) and scored by mr_bundle_predict_table. */
#include "cli.h"
#include "millrace/bundle.h"
#include "millrace/dataset.h"

#include <errno.h>
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

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* ---- the command line --------------------------------------------------------- */

typedef struct predict_opts {
    const char *bundle_path, *input, *output, *qpath; /* qpath: NULL in fail mode */
    char **ids;                                       /* --id columns (cli_split_list) */
    size_t n_ids, batch_rows;
    int raw, json, threads;
    char *qdefault;                                   /* owned default quarantine path */
    char *resolved;                                   /* owned: the bundle file (a models:/ URI resolved) */
} predict_opts;

static void opts_free(predict_opts *o)
{
    cli_free_list(o->ids);
    mr_free(o->qdefault);
    mr_free(o->resolved);
}

/* Fills o from argv; returns EXIT_OK or the usage error's exit code. */
static int parse_args(int argc, char **argv, predict_opts *o)
{
    const char *on_error = "fail", *qpath = NULL;
    memset(o, 0, sizeof(*o));
    o->batch_rows = 65536;
    int rc = EXIT_OK;
    for (int i = 1; i < argc && rc == EXIT_OK; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int takes = 1;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) o->output = v;
        else if (!strcmp(a, "--id")) {
            if (v) o->ids = cli_split_list(v, &o->n_ids);
        } else if (!strcmp(a, "-j") || !strcmp(a, "--threads")) o->threads = v ? (int)strtol(v, NULL, 10) : 0;
        else if (!strcmp(a, "--batch-rows")) o->batch_rows = v ? (size_t)strtoull(v, NULL, 10) : 0;
        else if (!strcmp(a, "--on-error")) on_error = v;
        else if (!strcmp(a, "--quarantine")) qpath = v;
        else {
            takes = 0;
            if (!strcmp(a, "--raw")) o->raw = 1;
            else if (!strcmp(a, "--json")) o->json = 1;
            else if (a[0] == '-' && a[1]) rc = cli_usage_error("predict", "unknown option '%s'", a);
            else if (!o->bundle_path) o->bundle_path = a;
            else if (!o->input) o->input = a;
            else rc = cli_usage_error("predict", "unexpected argument '%s'", a);
        }
        if (takes) {
            if (!v) rc = cli_usage_error("predict", "option '%s' needs a value", a);
            i++;
        }
    }
    if (rc == EXIT_OK && (!o->bundle_path || !o->input || !o->output))
        rc = cli_usage_error("predict", "expected BUNDLE INPUT -o OUTPUT");
    if (rc == EXIT_OK && on_error && strcmp(on_error, "fail") && strcmp(on_error, "quarantine"))
        rc = cli_usage_error("predict", "--on-error takes fail or quarantine, not '%s'", on_error);
    if (rc == EXIT_OK && (o->batch_rows == 0 || o->threads < 0))
        rc = cli_usage_error("predict", "--batch-rows and -j take positive numbers");
    if (rc == EXIT_OK) {
        rc = cli_resolve_bundle(o->bundle_path, &o->resolved);
        if (rc == EXIT_OK) o->bundle_path = o->resolved;
    }
    if (rc == EXIT_OK && !strcmp(on_error, "quarantine")) {
        o->qpath = qpath;
        if (!qpath) o->qpath = o->qdefault = mr_asprintf("%s.quarantine.csv", o->output);
        if (!o->qpath) rc = EXIT_FAILED;
    }
    return rc;
}

/* ---- output: Parquet or CSV/TSV, both streaming and published atomically ---- */

typedef struct out_sink {
    mr_parquet_writer *pq;    /* both writers publish path on close, never before */
    mr_csv_writer *csv;       /* the library's writer: the same quoting as every export */
} out_sink;

static mr_status sink_open(out_sink *o, const char *path, mr_error *err)
{
    memset(o, 0, sizeof(*o));
    if (ends_with(path, ".csv") || ends_with(path, ".tsv"))
        return mr_csv_writer_open(path, ends_with(path, ".tsv") ? '\t' : ',', &o->csv, err);
    if (!ends_with(path, ".parquet"))
        return MR_ERR(err, MR_E_INVALID_ARG, "%s: output must end in .parquet, .csv or .tsv", path);
    return mr_parquet_writer_open(path, NULL, &o->pq, err);
}

static mr_status sink_write(out_sink *o, const mr_table *t, mr_error *err)
{
    return o->pq ? mr_parquet_writer_write(o->pq, t, err) : mr_csv_writer_write(o->csv, t, err);
}

static mr_status sink_close(out_sink *o, int ok, mr_error *err)
{
    mr_status rc = MR_OK;
    if (o->csv) {
        if (ok) rc = mr_csv_writer_close(o->csv, err);
        else mr_csv_writer_free(o->csv);
        o->csv = NULL;
    }
    if (o->pq) {
        if (ok) rc = mr_parquet_writer_close(o->pq, err);
        else mr_parquet_writer_free(o->pq);
        o->pq = NULL;
    }
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
        if (mr_csv_reader_col_index(r, in->name) >= 0) {
            (*names)[*n] = in->name;
            (*types)[(*n)++] = MR_T_STRING;
        }
    }
    mr_csv_reader_close(r, NULL);
    return rc;
}

/* ---- one run ------------------------------------------------------------------ */

typedef struct predict_run {
    const predict_opts *o;
    mr_bundle *b;
    mr_source *src;
    const char **snames;  /* CSV input: the schema the reader is given */
    mr_dtype *stypes;
    out_sink sink;
    int sink_opened;
    FILE *qf;             /* quarantine file, or NULL in fail mode */
    uint64_t rows_in, rows_out, n_bad;
    double predict_s;     /* time inside mr_bundle_predict_table */
} predict_run;

/* Opens the bundle, the input (CSV: the bundle's inputs read as text, so
 * that every value is checked by the bundle's rules), the quarantine file
 * and the output. */
static mr_status open_run(predict_run *r, mr_error *err)
{
    const predict_opts *o = r->o;
    mr_status st = mr_bundle_load(o->bundle_path, &r->b, err);
    if (st == MR_OK) st = mr_pool_init(o->threads, err);
    int is_csv = ends_with(o->input, ".csv") || ends_with(o->input, ".tsv");
    mr_csv_options co;
    mr_csv_options_init(&co);
    size_t n_schema = 0;
    if (st == MR_OK && is_csv) {
        char delim = ends_with(o->input, ".tsv") ? '\t' : ',';
        st = csv_schema(r->b, o->input, delim, &r->snames, &r->stypes, &n_schema, err);
        co.schema_names = r->snames;
        co.schema_types = r->stypes;
        co.n_schema = n_schema;
    }
    if (st == MR_OK) st = mr_source_open(o->input, MR_SRC_AUTO, is_csv ? &co : NULL, &r->src, err);
    if (st == MR_OK && o->qpath) {
        r->qf = fopen(o->qpath, "wb");
        if (!r->qf) st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create quarantine file", o->qpath);
        else fputs("row,column,value,error\n", r->qf);
    }
    if (st == MR_OK) {
        st = sink_open(&r->sink, o->output, err);
        r->sink_opened = 1;
    }
    return st;
}

/* --on-error quarantine: one row,column,value,error record per value the
 * bundle's rules refuse, fields quoted by the CSV writer's rules. The rules
 * run column by column, so a batch's records are collected and written in
 * row order (a row's columns in schema order). */
typedef struct qrec {
    uint64_t row;
    size_t seq, off, len; /* seq: arrival order; [off, off+len) in the batch's text */
} qrec;

typedef struct qbatch {
    mr_buf text;
    qrec *recs;
    size_t n, cap;
    int oom;
} qbatch;

static void quarantine_value(void *ctx, const mr_bundle_bad *bad)
{
    qbatch *q = ctx;
    if (q->oom) return;
    if (q->n == q->cap) {
        size_t cap = q->cap ? 2 * q->cap : 64;
        qrec *g = mr_realloc(q->recs, cap * sizeof(*g));
        if (!g) {
            q->oom = 1;
            return;
        }
        q->recs = g;
        q->cap = cap;
    }
    mr_buf *b = &q->text;
    size_t off = b->len;
    int ok = mr_buf_printf(b, "%llu,", (unsigned long long)bad->row) == MR_OK &&
             mr_csv_append_field(b, bad->column, strlen(bad->column), ',') == MR_OK && mr_buf_puts(b, ",") == MR_OK &&
             (bad->text ? mr_csv_append_field(b, bad->text, bad->text_len, ',')
                        : mr_csv_append_field(b, bad->got, strlen(bad->got), ',')) == MR_OK &&
             mr_buf_printf(b, ",expected %s\n", bad->missing ? "a value" : bad->expected) == MR_OK;
    if (!ok) {
        q->oom = 1;
        return;
    }
    q->recs[q->n] = (qrec){bad->row, q->n, off, b->len - off};
    q->n++;
}

static int qrec_cmp(const void *a, const void *b)
{
    const qrec *x = a, *y = b;
    if (x->row != y->row) return x->row < y->row ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Writes a batch's records in row order and empties q. */
static mr_status quarantine_flush(predict_run *r, qbatch *q, mr_error *err)
{
    mr_status st = q->oom ? MR_ERR(err, MR_E_NOMEM, "out of memory") : MR_OK;
    if (st == MR_OK && q->n) {
        qsort(q->recs, q->n, sizeof(*q->recs), qrec_cmp);
        for (size_t i = 0; i < q->n; i++) fwrite(q->text.data + q->recs[i].off, 1, q->recs[i].len, r->qf);
        if (ferror(r->qf)) st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", r->o->qpath);
    }
    mr_buf_free(&q->text);
    mr_free(q->recs);
    memset(q, 0, sizeof(*q));
    return st;
}

/* The --id columns of use, then one column per model output. */
static mr_status result_table(const predict_run *r, const mr_table *use, const double *pred, size_t k, mr_table **out,
                              mr_error *err)
{
    mr_table *res = NULL;
    mr_status st = mr_table_new(&res, err);
    for (size_t q = 0; st == MR_OK && q < r->o->n_ids; q++) {
        const char *id = r->o->ids[q];
        const mr_column *c = mr_table_column(use, id);
        mr_column *copy = NULL;
        if (!c) {
            st = MR_ERR(err, MR_E_NOT_FOUND, "--id column '%s' is not in %s", id, r->o->input);
            break;
        }
        st = mr_column_slice(c, 0, c->n, &copy, err);
        if (st == MR_OK) st = mr_table_add_column(res, copy, err);
    }
    for (size_t q = 0; st == MR_OK && q < k; q++) {
        mr_column *c = NULL;
        st = mr_column_new(mr_bundle_output_name(r->b, q), MR_T_FLOAT64, use->n_rows, &c, err);
        for (size_t i = 0; st == MR_OK && i < use->n_rows; i++) st = mr_column_append_float64(c, pred[i * k + q]);
        if (st == MR_OK) st = mr_table_add_column(res, c, err);
        else mr_column_free(c);
    }
    if (st == MR_OK && res->n_cols) res->n_rows = use->n_rows;
    if (st != MR_OK) {
        mr_table_free(res);
        res = NULL;
    }
    *out = res;
    return st;
}

/* Fits one batch to the bundle's schema (the bundle's rules: bad values
 * fail the run or go to quarantine), scores the good rows and writes them. */
static mr_status score_batch(predict_run *r, mr_table *batch, mr_error *err)
{
    size_t n = batch->n_rows, n_keep = 0, k = 0;
    uint8_t *bad = mr_calloc(n ? n : 1, 1);
    uint32_t *keep = mr_malloc((n ? n : 1) * sizeof(uint32_t));
    mr_table *good = NULL, *res = NULL;
    double *pred = NULL;
    mr_status st = bad && keep ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_bundle_conform_opts co;
    mr_bundle_conform_opts_init(&co);
    co.text = 1;
    co.row_base = r->rows_in + 1;
    qbatch q = {0};
    mr_buf_init(&q.text);
    co.on_bad = r->qf ? quarantine_value : NULL;
    co.ctx = &q;
    co.bad_rows = bad;
    if (st == MR_OK) {
        st = mr_bundle_conform_table(r->b, batch, &co, err);
        if (st == MR_E_PARSE)
            mr_error_hint(err, "--on-error quarantine writes invalid rows to a file and scores the rest");
    }
    if (st == MR_OK) st = quarantine_flush(r, &q, err);
    else {
        mr_error ignored;
        mr_error_init(&ignored);
        quarantine_flush(r, &q, &ignored);
    }
    for (size_t i = 0; st == MR_OK && i < n; i++) {
        if (bad[i]) r->n_bad++;
        else keep[n_keep++] = (uint32_t)i;
    }
    if (st == MR_OK && n_keep < n) st = mr_table_take(batch, keep, n_keep, &good, err);
    const mr_table *use = good ? good : batch;
    double tp = mr_now();
    if (st == MR_OK) st = mr_bundle_predict_table(r->b, use, r->o->raw, r->o->threads, &pred, &k, err);
    r->predict_s += mr_now() - tp;
    if (st == MR_OK) st = result_table(r, use, pred, k, &res, err);
    if (st == MR_OK && use->n_rows) st = sink_write(&r->sink, res, err);
    r->rows_in += n;
    if (st == MR_OK) r->rows_out += use->n_rows;
    mr_free(pred);
    mr_table_free(res);
    mr_table_free(good);
    mr_free(bad);
    mr_free(keep);
    return st;
}

/* A CSV result of no rows still names its columns: the writer prints the
 * header of a 0-row table. */
static mr_status write_header_only(predict_run *r, mr_error *err)
{
    mr_table *t = NULL;
    mr_status st = mr_table_new(&t, err);
    size_t n_out = mr_bundle_n_outputs(r->b);
    for (size_t q = 0; st == MR_OK && q < r->o->n_ids + n_out; q++) {
        int is_id = q < r->o->n_ids;
        mr_column *c = NULL;
        st = mr_column_new(is_id ? r->o->ids[q] : mr_bundle_output_name(r->b, q - r->o->n_ids),
                           is_id ? MR_T_STRING : MR_T_FLOAT64, 0, &c, err);
        if (st == MR_OK) st = mr_table_add_column(t, c, err);
    }
    if (st == MR_OK) st = sink_write(&r->sink, t, err);
    mr_table_free(t);
    return st;
}

/* Closes output and quarantine (publishing the output only after success);
 * an empty CSV result still gets its header. */
static mr_status close_run(predict_run *r, mr_status st, mr_error *err)
{
    const predict_opts *o = r->o;
    if (st == MR_OK && r->rows_out == 0 && r->sink.csv) st = write_header_only(r, err);
    if (r->sink_opened) {
        mr_status cst = sink_close(&r->sink, st == MR_OK, err);
        if (st == MR_OK) st = cst;
    }
    if (r->qf && fclose(r->qf) != 0 && st == MR_OK) st = MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", o->qpath);
    r->qf = NULL;
    mr_source_close(r->src, NULL);
    r->src = NULL;
    return st;
}

static void print_summary(const predict_run *r, double secs)
{
    const predict_opts *o = r->o;
    if (o->json)
        printf("{\"rows\": %llu, \"scored\": %llu, \"quarantined\": %llu, \"output\": \"%s\", \"seconds\": %.6f, "
               "\"predict_seconds\": %.6f}\n",
               (unsigned long long)r->rows_in, (unsigned long long)r->rows_out, (unsigned long long)r->n_bad, o->output,
               secs, r->predict_s);
    else
        printf("scored %llu of %llu rows in %.3fs -> %s\n", (unsigned long long)r->rows_out,
               (unsigned long long)r->rows_in, secs, o->output);
    if (r->n_bad)
        fprintf(stderr, "millrace: warning: %llu invalid row%s quarantined -> %s\n", (unsigned long long)r->n_bad,
                r->n_bad == 1 ? "" : "s", o->qpath);
}

int cmd_predict(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(predict_help, stdout);
        return EXIT_OK;
    }
    predict_opts o;
    int rc = parse_args(argc, argv, &o);
    if (rc != EXIT_OK) {
        opts_free(&o);
        return rc;
    }
    mr_error err;
    mr_error_init(&err);
    predict_run r;
    memset(&r, 0, sizeof(r));
    r.o = &o;
    double t0 = mr_now();
    mr_status st = open_run(&r, &err);
    while (st == MR_OK) {
        mr_table *batch = NULL;
        st = mr_source_next(r.src, o.batch_rows, &batch, &err);
        if (st != MR_OK || !batch) break;
        st = score_batch(&r, batch, &err);
        mr_table_free(batch);
    }
    st = close_run(&r, st, &err);
    if (st != MR_OK) {
        if (!err.file[0]) mr_error_at(&err, o.input, 0, 0);
        mr_log_error(&err);
        rc = EXIT_FAILED; /* the arguments were fine (parse_args): a missing or bad input is a run-time failure */
    } else {
        print_summary(&r, mr_now() - t0);
    }
    mr_free((void *)r.snames);
    mr_free(r.stypes);
    mr_bundle_free(r.b);
    opts_free(&o);
    return rc;
}
