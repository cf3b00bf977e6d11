/* Test helper (not installed): runs a transform over CSV files through the
 * public API, for the DuckDB oracle script and for humans.
 *
 *   mr_xftool STEPS.yaml INPUT.csv [NAME=JOIN.csv ...]
 *
 * STEPS.yaml holds the step list (a YAML sequence, or a mapping with a
 * `steps:` key). The output goes to stdout as CSV: a header, then values as
 * mr_column_format prints them (NULL for nulls), RFC 4180 quoting.
 * MILLRACE_THREADS sets the pool size (default: CPUs). Errors go to stderr,
 * exit status 1. */
#include "millrace/csv.h"
#include "millrace/spec.h"
#include "millrace/transform.h"
#include "millrace/value.h"

#include <stdlib.h>
#include <string.h>

static void put_cell(const mr_buf *b)
{
    int q = 0;
    for (size_t i = 0; i < b->len; i++)
        if (b->data[i] == ',' || b->data[i] == '"' || b->data[i] == '\n' || b->data[i] == '\r') q = 1;
    if (!q) {
        fwrite(b->data, 1, b->len, stdout);
        return;
    }
    putchar('"');
    for (size_t i = 0; i < b->len; i++) {
        if (b->data[i] == '"') putchar('"');
        putchar(b->data[i]);
    }
    putchar('"');
}

static mr_status print_batch(void *ctx, mr_table *t, mr_error *err)
{
    (void)ctx;
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = MR_OK;
    for (size_t i = 0; i < t->n_rows && rc == MR_OK; i++) {
        for (size_t j = 0; j < t->n_cols && rc == MR_OK; j++) {
            b.len = 0;
            rc = mr_column_format(t->cols[j], i, &b);
            if (j) putchar(',');
            if (rc == MR_OK) put_cell(&b);
        }
        putchar('\n');
    }
    mr_buf_free(&b);
    mr_table_free(t);
    if (rc != MR_OK) return MR_ERR(err, rc, "formatting output");
    return MR_OK;
}

typedef struct src {
    mr_csv_reader *r;
} src;

static mr_status next_batch(void *ctx, mr_table **out, mr_error *err)
{
    src *s = ctx;
    return mr_csv_reader_next(s->r, 1000, out, err);
}

static mr_transform_schema schema_of(const char *name, const mr_table *t)
{
    mr_transform_schema s = {name, t->n_cols, NULL, NULL};
    const char **names = mr_calloc(t->n_cols + 1, sizeof(char *));
    mr_dtype *types = mr_calloc(t->n_cols + 1, sizeof(mr_dtype));
    for (size_t i = 0; names && types && i < t->n_cols; i++) {
        names[i] = t->cols[i]->name;
        types[i] = t->cols[i]->type;
    }
    s.col_names = names;
    s.col_types = types;
    return s;
}

int main(int argc, char **argv)
{
    int code = 1;
    mr_error err;
    mr_error_init(&err);
    char *text = NULL;
    size_t len = 0;
    mr_value *doc = NULL;
    mr_transform *x = NULL;
    src s = {NULL};
    size_t n_joins = argc > 3 ? (size_t)argc - 3 : 0;
    mr_table **jt = calloc(n_joins + 1, sizeof(mr_table *));
    mr_transform_table *jtab = calloc(n_joins + 1, sizeof(mr_transform_table));
    mr_transform_schema *js = calloc(n_joins + 1, sizeof(mr_transform_schema));
    char **jnames = calloc(n_joins + 1, sizeof(char *));
    if (argc < 3) {
        fprintf(stderr, "usage: mr_xftool STEPS.yaml INPUT.csv [NAME=JOIN.csv ...]\n");
        goto done;
    }
    const char *th = getenv("MILLRACE_THREADS");
    if (mr_pool_init(th ? (int)strtol(th, NULL, 10) : 0, &err) != MR_OK) goto fail;
    if (mr_fs_read_file(argv[1], 1 << 20, &text, &len, &err) != MR_OK) goto fail;
    if (mr_yaml_parse(text, len, argv[1], &doc, &err) != MR_OK) goto fail;
    const mr_value *steps = doc->kind == MR_V_MAP ? mr_value_get(doc, "steps") : doc;
    if (mr_transform_parse(steps, &x, &err) != MR_OK) goto fail;
    for (size_t k = 0; k < n_joins; k++) {
        const char *eq = strchr(argv[3 + k], '=');
        if (!eq) {
            fprintf(stderr, "mr_xftool: expected NAME=FILE.csv, got %s\n", argv[3 + k]);
            goto done;
        }
        jnames[k] = mr_strndup(argv[3 + k], (size_t)(eq - argv[3 + k]));
        if (mr_csv_read(eq + 1, NULL, &jt[k], NULL, &err) != MR_OK) goto fail;
        js[k] = schema_of(jnames[k], jt[k]);
        jtab[k].name = jnames[k];
        jtab[k].table = jt[k];
    }
    if (mr_csv_reader_open(argv[2], NULL, &s.r, &err) != MR_OK) goto fail;
    size_t nc = mr_csv_reader_n_cols(s.r);
    const char **names = mr_calloc(nc + 1, sizeof(char *));
    mr_dtype *types = mr_calloc(nc + 1, sizeof(mr_dtype));
    for (size_t j = 0; j < nc; j++) {
        names[j] = mr_csv_reader_col_name(s.r, j);
        types[j] = mr_csv_reader_col_type(s.r, j);
    }
    mr_transform_schema in = {NULL, nc, names, types};
    const mr_transform_schema *os = NULL;
    mr_status rc = mr_transform_bind(x, &in, js, n_joins, &os, &err);
    mr_free(names);
    mr_free(types);
    if (rc != MR_OK) goto fail;
    for (size_t j = 0; j < os->n_cols; j++) printf("%s%s", j ? "," : "", os->col_names[j]);
    putchar('\n');
    mr_transform_opts o = {.threads = 0};
    if (mr_transform_run(x, next_batch, &s, jtab, n_joins, print_batch, NULL, &o, NULL, &err) != MR_OK) goto fail;
    code = 0;
    goto done;
fail:
    mr_log_error(&err);
done:
    if (s.r) mr_csv_reader_close(s.r, NULL);
    for (size_t k = 0; k < n_joins; k++) {
        mr_table_free(jt[k]);
        mr_free(jnames[k]);
        mr_free((void *)js[k].col_names);
        mr_free((void *)js[k].col_types);
    }
    free(jt);
    free(jtab);
    free(js);
    free(jnames);
    mr_transform_free(x);
    mr_value_free(doc);
    mr_free(text);
    mr_pool_shutdown();
    return code;
}
