/* Test helper (not installed): fits a features spec on a CSV and applies it
 * to another, through the public API, for the scikit-learn oracle script
 * (tests/e2e/test_features_sklearn.sh) and for humans.
 *
 *   mr_feattool fit SPEC.yaml TRAIN.csv APPLY.csv [LABEL] [OUT.mrft]
 *       fits on TRAIN (LABEL may be "-" for none), optionally saves the
 *       artifact, reloads it, and prints APPLY transformed as CSV
 *   mr_feattool apply ART.mrft APPLY.csv     prints APPLY transformed
 *   mr_feattool meta ART.mrft                one line per output:
 *                                            name,source,categorical,n_categories
 * CSV out: a header of output names, then values as %.17g ("nan" for NaN).
 * The batch output is checked against the single-row path on every row. */
#include "millrace/csv.h"
#include "millrace/features.h"
#include "millrace/spec.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

static int die(const mr_error *err)
{
    mr_log_error(err);
    return 1;
}

static void put_name(const char *s)
{
    if (!strpbrk(s, ",\"\n\r")) {
        fputs(s, stdout);
        return;
    }
    putchar('"');
    for (; *s; s++) {
        if (*s == '"') putchar('"');
        putchar(*s);
    }
    putchar('"');
}

/* Prints f applied to the CSV at path; 0 on success. */
static int apply_and_print(const mr_features *f, const char *path, mr_error *err)
{
    mr_table *t = NULL, *o = NULL;
    int rc = 1;
    if (mr_csv_read(path, NULL, &t, NULL, err) != MR_OK) goto done;
    if (mr_features_apply(f, t, &o, err) != MR_OK) goto done;
    size_t n_in = mr_features_n_inputs(f), n_out = mr_features_n_outputs(f);
    mr_cell *cells = mr_calloc(n_in ? n_in : 1, sizeof(mr_cell));
    double *vec = mr_calloc(n_out ? n_out : 1, sizeof(double));
    if (!cells || !vec) {
        mr_free(cells);
        mr_free(vec);
        MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t j = 0; j < n_out; j++) {
        if (j) putchar(',');
        put_name(mr_features_output_at(f, j)->name);
    }
    putchar('\n');
    mr_row_view row = {.cells = cells, .n_cells = n_in};
    for (size_t i = 0; i < o->n_rows; i++) {
        for (size_t k = 0; k < n_in; k++)
            mr_features_cell(mr_table_column(t, mr_features_input_at(f, k)->name), i, &cells[k]);
        if (mr_features_apply_row(f, &row, vec, err) != MR_OK) break;
        for (size_t j = 0; j < n_out; j++) {
            double v = ((const double *)o->cols[j]->data)[i];
            if (memcmp(&v, &vec[j], sizeof(double)) != 0) {
                MR_ERR(err, MR_E_INTERNAL, "row %zu output '%s': batch %.17g != row %.17g", i,
                       mr_features_output_at(f, j)->name, v, vec[j]);
                break;
            }
            if (j) putchar(',');
            if (isnan(v)) fputs("nan", stdout);
            else printf("%.17g", v);
        }
        if (mr_error_is_set(err)) break;
        putchar('\n');
    }
    mr_free(cells);
    mr_free(vec);
    rc = mr_error_is_set(err) ? 1 : 0;
done:
    mr_table_free(t);
    mr_table_free(o);
    return rc;
}

static int load_artifact(const char *path, mr_features **f, mr_error *err)
{
    char *data = NULL;
    size_t len = 0;
    if (mr_fs_read_file(path, (size_t)1 << 30, &data, &len, err) != MR_OK) return 1;
    mr_status rc = mr_features_load(data, len, f, err);
    mr_free(data);
    if (rc != MR_OK) mr_error_at(err, path, 0, 0);
    return rc != MR_OK;
}

int main(int argc, char **argv)
{
    mr_error err;
    mr_error_init(&err);
    if (argc >= 5 && strcmp(argv[1], "fit") == 0) {
        char *text = NULL;
        size_t len = 0;
        mr_value *v = NULL;
        mr_features_spec *spec = NULL;
        mr_table *train = NULL;
        mr_features *f = NULL, *g = NULL;
        mr_buf b;
        mr_buf_init(&b);
        int rc = 1;
        const char *label = argc >= 6 && strcmp(argv[5], "-") != 0 ? argv[5] : NULL;
        if (mr_fs_read_file(argv[2], (size_t)1 << 24, &text, &len, &err) != MR_OK) goto out;
        if (mr_yaml_parse(text, len, argv[2], &v, &err) != MR_OK) goto out;
        if (mr_features_spec_parse(v, argv[2], &spec, &err) != MR_OK) goto out;
        if (mr_csv_read(argv[3], NULL, &train, NULL, &err) != MR_OK) goto out;
        if (mr_features_fit(spec, train, label, &f, &err) != MR_OK) goto out;
        if (mr_features_save(f, &b) != MR_OK) {
            MR_ERR(&err, MR_E_NOMEM, "cannot serialise");
            goto out;
        }
        if (argc >= 7 && mr_fs_write_atomic(argv[6], b.data, b.len, &err) != MR_OK) goto out;
        /* apply through the reloaded artifact: what predict/serve would do */
        if (mr_features_load(b.data, b.len, &g, &err) != MR_OK) goto out;
        rc = apply_and_print(g, argv[4], &err);
    out:
        if (mr_error_is_set(&err)) rc = die(&err);
        mr_buf_free(&b);
        mr_features_free(f);
        mr_features_free(g);
        mr_table_free(train);
        mr_features_spec_free(spec);
        mr_value_free(v);
        mr_free(text);
        return rc;
    }
    if (argc == 4 && strcmp(argv[1], "apply") == 0) {
        mr_features *f = NULL;
        int rc = load_artifact(argv[2], &f, &err) || apply_and_print(f, argv[3], &err);
        if (rc) die(&err);
        mr_features_free(f);
        return rc;
    }
    if (argc == 3 && strcmp(argv[1], "meta") == 0) {
        mr_features *f = NULL;
        if (load_artifact(argv[2], &f, &err)) return die(&err);
        for (size_t j = 0; j < mr_features_n_outputs(f); j++) {
            const mr_features_output *o = mr_features_output_at(f, j);
            put_name(o->name);
            printf(",%s,%d,%u\n", o->source, o->categorical, o->n_categories);
        }
        mr_features_free(f);
        return 0;
    }
    fprintf(stderr, "usage: mr_feattool fit SPEC.yaml TRAIN.csv APPLY.csv [LABEL|-] [OUT.mrft]\n"
                    "       mr_feattool apply ART.mrft APPLY.csv\n"
                    "       mr_feattool meta ART.mrft\n");
    return 2;
}
