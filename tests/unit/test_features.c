/* Unit tests for feature transforms (src/ml/features_*.c): values computed
 * by hand for every step, output names and metadata, selectors, the
 * no column lost without a word, kept ids, the target-encoding leak test,
 * batch == single-row bit for bit, thread-count independence, the MRFT artifact (round trip, determinism, truncation and
 * corruption) and spec/fit/apply errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "millrace/features.h"
#include "millrace/spec.h"
#include "ml/ml_int.h"

#define TOL 1e-12 /* hand-computed values: a few ulps of double arithmetic */

static uint64_t rng_state;
static uint64_t rng(void) /* splitmix64 */
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static mr_column *fcol(const char *name, const double *v, size_t n) /* NaN -> null */
{
    mr_column *c = NULL;
    assert_ok(mr_column_new(name, MR_T_FLOAT64, n, &c, NULL));
    for (size_t i = 0; i < n; i++) assert_ok(isnan(v[i]) ? mr_column_append_null(c) : mr_column_append_float64(c, v[i]));
    return c;
}

static mr_column *icol(const char *name, const int64_t *v, size_t n)
{
    mr_column *c = NULL;
    assert_ok(mr_column_new(name, MR_T_INT64, n, &c, NULL));
    for (size_t i = 0; i < n; i++) assert_ok(mr_column_append_int64(c, v[i]));
    return c;
}

static mr_column *scol(const char *name, const char *const *v, size_t n) /* NULL -> null */
{
    mr_column *c = NULL;
    assert_ok(mr_column_new(name, MR_T_STRING, n, &c, NULL));
    for (size_t i = 0; i < n; i++)
        assert_ok(v[i] ? mr_column_append_str(c, v[i], strlen(v[i])) : mr_column_append_null(c));
    return c;
}

static mr_table *table_of(mr_column **cols, size_t n)
{
    mr_table *t = NULL;
    assert_ok(mr_table_new(&t, NULL));
    for (size_t j = 0; j < n; j++) assert_ok(mr_table_add_column(t, cols[j], NULL));
    return t;
}

static mr_features_spec *spec_of(const char *yaml)
{
    mr_value *v = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_yaml_parse(yaml, strlen(yaml), "f.yaml", &v, &err) != MR_OK) {
        fprintf(stderr, "yaml: %s\n", err.msg);
        fail();
    }
    mr_features_spec *s = NULL;
    if (mr_features_spec_parse(v, "f.yaml", &s, &err) != MR_OK) {
        fprintf(stderr, "spec: %ld:%ld %s\n", err.line, err.col, err.msg);
        fail();
    }
    mr_value_free(v);
    return s;
}

static mr_status spec_err(const char *yaml, mr_error *err)
{
    mr_value *v = NULL;
    assert_ok(mr_yaml_parse(yaml, strlen(yaml), "f.yaml", &v, NULL));
    mr_features_spec *s = NULL;
    mr_status rc = mr_features_spec_parse(v, "f.yaml", &s, err);
    mr_features_spec_free(s);
    mr_value_free(v);
    return rc;
}

static double val(const mr_table *t, const char *col, size_t i)
{
    const mr_column *c = mr_table_column(t, col);
    if (!c) {
        fprintf(stderr, "no output column '%s'\n", col);
        fail();
    }
    assert_int_equal(c->type, MR_T_FLOAT64);
    return ((const double *)c->data)[i];
}

static void near(double got, double want, const char *what)
{
    if (isnan(want) ? !isnan(got) : !(fabs(got - want) <= TOL * (1 + fabs(want)))) {
        fprintf(stderr, "%s: got %.17g, want %.17g\n", what, got, want);
        fail();
    }
}

static mr_features *fit(const char *yaml, const mr_table *t, const char *label)
{
    mr_features_spec *s = spec_of(yaml);
    mr_features *f = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_features_fit(s, t, label, &f, &err) != MR_OK) {
        fprintf(stderr, "fit: %ld:%ld %s\n", err.line, err.col, err.msg);
        fail();
    }
    mr_features_spec_free(s);
    return f;
}

static mr_table *apply(const mr_features *f, const mr_table *t)
{
    mr_table *o = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_features_apply(f, t, &o, &err) != MR_OK) {
        fprintf(stderr, "apply: %s\n", err.msg);
        fail();
    }
    return o;
}

/* ---- hand-computed values ---------------------------------------------------- */

static const char *BASIC_SPEC =
    "- impute: {columns: [age], strategy: mean, indicator: true}\n"
    "- standardize: {columns: [age]}\n"
    "- minmax: {columns: [income]}\n"
    "- onehot: {columns: [plan], top_k: 1, other: true}\n"
    "- ordinal: {columns: [city]}\n";

static mr_table *basic_train(void)
{
    double age[] = {1, 2, NAN, 4, 8};
    int64_t income[] = {10, 20, 30, 40, 50};
    const char *plan[] = {"basic", "pro", "basic", NULL, "enterprise"};
    const char *city[] = {"a", "b", "c", "a", "a"};
    int64_t y[] = {0, 1, 0, 1, 1};
    mr_column *cols[] = {fcol("age", age, 5), icol("income", income, 5), scol("plan", plan, 5), scol("city", city, 5),
                         icol("y", y, 5)};
    return table_of(cols, 5);
}

static void test_hand_values(void **state)
{
    (void)state;
    mr_table *train = basic_train();
    mr_features *f = fit(BASIC_SPEC, train, "y");
    const char *names[] = {"age", "age#missing", "income", "plan=basic", "plan=other", "city"};
    assert_int_equal(mr_features_n_outputs(f), 6);
    for (size_t j = 0; j < 6; j++) assert_string_equal(mr_features_output_at(f, j)->name, names[j]);
    assert_string_equal(mr_features_output_at(f, 4)->source, "plan");
    assert_int_equal(mr_features_output_at(f, 4)->input, 2);
    assert_int_equal(mr_features_output_at(f, 5)->categorical, 1);
    assert_int_equal(mr_features_output_at(f, 5)->n_categories, 4); /* a b c + unseen */
    assert_int_equal(mr_features_output_at(f, 0)->categorical, 0);
    assert_int_equal(mr_features_n_inputs(f), 4);
    assert_int_equal(mr_features_input_at(f, 3)->categorical, 1);
    assert_null(mr_features_output_at(f, 6));

    double age[] = {NAN, 10};
    int64_t income[] = {30, 90};
    const char *plan[] = {"pro", "zzz"};
    const char *city[] = {"b", "q"};
    mr_column *cols[] = {fcol("age", age, 2), icol("income", income, 2), scol("plan", plan, 2), scol("city", city, 2)};
    mr_table *test = table_of(cols, 4);
    mr_table *o = apply(f, test);
    assert_int_equal(o->n_rows, 2);
    assert_int_equal(o->n_cols, 6);
    double sd = sqrt(5.75); /* train age after impute: 1 2 3.75 4 8 */
    near(val(o, "age", 0), 0.0, "age[0]");
    near(val(o, "age", 1), (10 - 3.75) / sd, "age[1]");
    near(val(o, "age#missing", 0), 1, "miss[0]");
    near(val(o, "age#missing", 1), 0, "miss[1]");
    near(val(o, "income", 0), 0.5, "income[0]");
    near(val(o, "income", 1), 2.0, "income[1]");
    near(val(o, "plan=basic", 0), 0, "basic[0]");
    near(val(o, "plan=other", 0), 1, "other[0]");
    near(val(o, "plan=other", 1), 1, "other[1]");
    near(val(o, "city", 0), 1, "city[0]");
    near(val(o, "city", 1), 3, "city[1] (unseen -> reserved code)");
    mr_table_free(o);
    /* on train itself: null plan -> all zeros */
    o = apply(f, train);
    near(val(o, "plan=basic", 3), 0, "null plan basic");
    near(val(o, "plan=other", 3), 0, "null plan other");
    near(val(o, "plan=basic", 2), 1, "basic");
    near(val(o, "age", 2), 0.0, "imputed age standardized");
    mr_table_free(o);
    mr_table_free(test);
    mr_features_free(f);
    mr_table_free(train);
}

static void test_numeric_steps(void **state)
{
    (void)state;
    double x[10], z[10];
    for (int i = 0; i < 10; i++) x[i] = i, z[i] = i - 2;
    x[7] = NAN;
    mr_column *cols[] = {fcol("x", x, 10), fcol("z", z, 10)};
    mr_table *t = table_of(cols, 2);
    /* x non-null: 0..6, 8, 9 -> median 4; bucketize on imputed 0..6,4,8,9 */
    mr_features *f = fit("- impute: {columns: [x], strategy: median}\n"
                         "- bucketize: {columns: [x], n_bins: 4}\n"
                         "- clip: {columns: [z], lo: -1, hi: 5}\n"
                         "- log1p: {columns: [z]}\n",
                         t, NULL);
    mr_table *o = apply(f, t);
    /* sorted x: 0 1 2 3 4 4 5 6 8 9; percentiles at 9*q: 2.25 -> 2.25, 4.5 -> 4, 6.75 -> 5.75;
     * a value equal to an edge goes to the upper bin */
    double want_bins[] = {0, 0, 0, 1, 2, 2, 3, 2, 3, 3};
    for (int i = 0; i < 10; i++) near(val(o, "x", (size_t)i), want_bins[i], "bucket");
    for (int i = 0; i < 10; i++) {
        double c = z[i] < -1 ? -1 : z[i] > 5 ? 5 : z[i];
        near(val(o, "z", (size_t)i), c > -1 ? log1p(c) : NAN, "clip+log1p");
    }
    mr_table_free(o);
    mr_features_free(f);
    /* impute most_frequent (ties -> smallest) and constant */
    f = fit("- impute: {columns: [x], strategy: most_frequent}\n- impute: {columns: [z], strategy: constant, value: 42}\n", t, NULL);
    o = apply(f, t);
    near(val(o, "x", 7), 0, "most_frequent tie -> smallest");
    near(val(o, "z", 3), 1, "no missing: unchanged");
    mr_table_free(o);
    mr_features_free(f);
    mr_table_free(t);
}

static void test_categorical_steps(void **state)
{
    (void)state;
    const char *c[] = {"x", "y", NULL, "y", "z", "y", NULL, "x"};
    int64_t k[] = {10, 20, 10, 30, 10, 20, 10, 10};
    double y[] = {1, 0, 1, 1, 0, 1, 0, 1};
    mr_column *cols[] = {scol("c", c, 8), icol("k", k, 8), fcol("y", y, 8)};
    mr_table *t = table_of(cols, 3);
    mr_features *f = fit("- impute: {columns: [c], strategy: most_frequent, indicator: true}\n"
                         "- onehot: {columns: [c], other: false}\n"
                         "- onehot: {columns: [k], top_k: 2}\n",
                         t, "y");
    const char *names[] = {"c=x", "c=y", "c=z", "c#missing", "k=10", "k=20", "k=other"};
    assert_int_equal(mr_features_n_outputs(f), 7);
    for (size_t j = 0; j < 7; j++) assert_string_equal(mr_features_output_at(f, j)->name, names[j]);
    mr_table *o = apply(f, t);
    near(val(o, "c=y", 2), 1, "null imputed with most frequent y");
    near(val(o, "c#missing", 2), 1, "indicator");
    near(val(o, "c#missing", 1), 0, "indicator 0");
    near(val(o, "k=other", 3), 1, "30 -> other");
    near(val(o, "k=10", 0), 1, "int key");
    mr_table_free(o);
    mr_features_free(f);

    /* hash: one bucket per row, +1 (unsigned) or +-1 (signed); null -> zeros */
    f = fit("- hash: {columns: [c], n_features: 4, seed: 3}\n", t, "y");
    assert_string_equal(mr_features_output_at(f, 3)->name, "c#hash3");
    o = apply(f, t);
    for (size_t i = 0; i < 8; i++) {
        double s = 0;
        for (int j = 0; j < 4; j++) {
            char nm[16];
            snprintf(nm, sizeof(nm), "c#hash%d", j);
            s += val(o, nm, i);
        }
        near(s, c[i] ? 1 : 0, "hash row sum");
    }
    mr_table_free(o);
    mr_features_free(f);

    /* target encoding with smoothing 1: prior 5/8; x: (2 + 0.625)/3, y: (2 + 0.625)/4, z: (0 + 0.625)/2 */
    f = fit("- target_encode: {columns: [c], smoothing: 1}\n- drop: {columns: [k]}\n", t, "y");
    const char *c2[] = {"x", "y", "z", "w", NULL};
    mr_column *cols2[] = {scol("c", c2, 5)};
    mr_table *t2 = table_of(cols2, 1);
    o = apply(f, t2);
    near(val(o, "c#te", 0), 2.625 / 3, "te x");
    near(val(o, "c#te", 1), 2.625 / 4, "te y");
    near(val(o, "c#te", 2), 0.625 / 2, "te z");
    near(val(o, "c#te", 3), 0.625, "te unseen -> prior");
    near(val(o, "c#te", 4), 0.625, "te null -> prior");
    mr_table_free(o);
    mr_table_free(t2);
    mr_features_free(f);
    mr_table_free(t);
}

static void test_selectors_and_passthrough(void **state)
{
    (void)state;
    double a[] = {1, 2, 3}, b[] = {4, 6, 8};
    int64_t id[] = {7, 8, 9}, y[] = {0, 1, 0};
    const char *s[] = {"u", "v", "u"}, *txt[] = {"p", "q", "r"};
    mr_column *cols[] = {fcol("a", a, 3), icol("id", id, 3), scol("s", s, 3), fcol("b", b, 3), scol("txt", txt, 3),
                         icol("y", y, 3)};
    mr_table *t = table_of(cols, 6);
    mr_features *f = fit("- drop: {columns: [id, txt]}\n"
                         "- standardize: {columns: numeric}\n"
                         "- ordinal: {columns: [s]}\n",
                         t, "y");
    /* a, b standardized; id and txt dropped; s ordinal; y label */
    const char *names[] = {"a", "s", "b"};
    assert_int_equal(mr_features_n_outputs(f), 3);
    for (size_t j = 0; j < 3; j++) assert_string_equal(mr_features_output_at(f, j)->name, names[j]);
    mr_table *o = apply(f, t);
    near(val(o, "b", 2), 2 / sqrt(8.0 / 3), "b standardized");
    mr_table_free(o);
    mr_features_free(f);
    f = fit("- minmax: {columns: all}\n- onehot: {columns: categorical, top_k: 0, other: false}\n", t, "y");
    assert_int_equal(mr_features_n_outputs(f), 8); /* a id s=u s=v b txt=p txt=q txt=r */
    mr_features_free(f);
    mr_table_free(t);
}

/* ---- every column is accounted for; keep ------------------------------------------ */

/* Fits yaml with the keep list keep_yaml (a YAML flow sequence, or NULL);
 * returns the status, the fitted transform in *out (or NULL). */
static mr_status fit_keep(const char *yaml, const char *keep_yaml, const mr_table *t, const char *label,
                          mr_features **out, mr_error *err)
{
    mr_features_spec *s = spec_of(yaml);
    mr_value *k = NULL;
    if (keep_yaml) assert_ok(mr_yaml_parse(keep_yaml, strlen(keep_yaml), "keep.yaml", &k, NULL));
    mr_status rc = mr_features_spec_set_keep(s, k, err);
    *out = NULL;
    if (rc == MR_OK) rc = mr_features_fit(s, t, label, out, err);
    mr_value_free(k);
    mr_features_spec_free(s);
    return rc;
}

static void save_bytes(const mr_features *f, mr_buf *b)
{
    mr_buf_init(b);
    assert_ok(mr_features_save(f, b));
}

static int has_output(const mr_features *f, const char *name)
{
    for (size_t j = 0; j < mr_features_n_outputs(f); j++)
        if (!strcmp(mr_features_output_at(f, j)->name, name)) return 1;
    return 0;
}

static void test_no_column_lost(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_features *f = NULL;
    double a[] = {1, 2, 3, 4, 5};
    int64_t y[] = {0, 1, 0, 1, 1};
    const char *txt[] = {"p", "q", NULL, "r", "p"};
    /* a numeric column that became strings through one stray token */
    const char *age[] = {"31", "n/a", "45", "28", "52"};
    mr_column *cols[] = {fcol("a", a, 5), scol("txt", txt, 5), icol("y", y, 5)};
    mr_table *t = table_of(cols, 3);

    /* an unencoded string column is an error naming it and the encodings that fit */
    assert_status(fit_keep("- standardize: {columns: [a]}\n", NULL, t, "y", &f, &err), MR_E_SCHEMA);
    assert_null(f);
    assert_string_equal(err.key, "txt");
    assert_non_null(strstr(err.msg, "column 'txt' is a string column that no step encodes"));
    assert_non_null(strstr(err.msg, "onehot, ordinal, hash or target_encode"));
    assert_non_null(strstr(err.hint, "- drop: {columns: [txt]}"));
    assert_non_null(strstr(err.hint, "keep: [txt]"));
    assert_null(strstr(err.msg, "are numbers")); /* none of p, q, r is */
    mr_error_clear(&err);
    /* a categorical impute alone is no encoding */
    assert_status(fit_keep("- impute: {columns: [txt], strategy: most_frequent}\n", NULL, t, "y", &f, &err), MR_E_SCHEMA);
    assert_string_equal(err.key, "txt");
    mr_error_clear(&err);
    /* excluded deliberately: dropped or kept, or encoded */
    assert_ok(fit_keep("- drop: {columns: [txt]}\n", NULL, t, "y", &f, &err));
    assert_int_equal(mr_features_n_inputs(f), 1);
    mr_features_free(f);
    assert_ok(fit_keep("- standardize: {columns: [a]}\n", "[txt]", t, "y", &f, &err));
    assert_int_equal(mr_features_n_inputs(f), 1);
    assert_int_equal(mr_features_n_outputs(f), 1);
    mr_features_free(f);
    assert_ok(fit_keep("- hash: {columns: [txt], n_features: 2}\n", NULL, t, "y", &f, &err));
    assert_int_equal(mr_features_n_inputs(f), 2);
    mr_features_free(f);

    /* mostly numbers: the message says so and shows the first stray value */
    assert_ok(mr_table_add_column(t, scol("age", age, 5), NULL));
    assert_status(fit_keep("- drop: {columns: [txt]}\n", NULL, t, "y", &f, &err), MR_E_SCHEMA);
    assert_string_equal(err.key, "age");
    assert_non_null(strstr(err.msg, "4 of its 5 values are numbers, but row 2 holds \"n/a\""));
    assert_non_null(strstr(err.hint, "if it is numeric"));
    mr_error_clear(&err);

    /* a date column is not silently lost either */
    mr_column *d = NULL;
    assert_ok(mr_column_new("signup", MR_T_DATE, 5, &d, NULL));
    for (int32_t i = 0; i < 5; i++) assert_ok(mr_column_append_int32(d, 19000 + i));
    assert_ok(mr_table_add_column(t, d, NULL));
    assert_status(fit_keep("- drop: {columns: [txt, age]}\n", NULL, t, "y", &f, &err), MR_E_SCHEMA);
    assert_string_equal(err.key, "signup");
    assert_non_null(strstr(err.msg, "is a date column"));
    assert_non_null(strstr(err.hint, "- drop: {columns: [signup]}"));
    mr_error_clear(&err);
    assert_ok(fit_keep("- drop: {columns: [txt, age, signup]}\n", NULL, t, "y", &f, &err));
    mr_features_free(f);
    assert_ok(fit_keep("- drop: {columns: [txt, age]}\n", "[signup]", t, "y", &f, &err));
    assert_int_equal(mr_features_n_inputs(f), 1);
    mr_features_free(f);
    mr_table_free(t);
}

static void test_keep(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_features *f = NULL, *g = NULL;
    mr_buf b1, b2;
    double a[] = {1, 2, 3, 4, 5};
    int64_t id[] = {101, 102, 103, 104, 105}, y[] = {0, 1, 0, 1, 1};
    const char *plan[] = {"x", "y", "x", "z", "x"};
    mr_column *cols[] = {icol("customer_id", id, 5), fcol("a", a, 5), scol("plan", plan, 5), icol("y", y, 5)};
    mr_table *t = table_of(cols, 4);

    /* an id kept for joining: not an input, skipped by selectors */
    assert_ok(fit_keep("- standardize: {columns: numeric}\n- onehot: {columns: [plan]}\n", "[customer_id]", t, "y",
                              &f, &err));
    assert_int_equal(mr_features_n_inputs(f), 2);
    assert_false(has_output(f, "customer_id"));
    assert_true(has_output(f, "a"));
    /* ... the very transform the old spelling (drop + keep) fits */
    assert_ok(fit_keep("- drop: {columns: [customer_id]}\n- standardize: {columns: numeric}\n"
                              "- onehot: {columns: [plan]}\n",
                              "[customer_id]", t, "y", &g, &err));
    save_bytes(f, &b1);
    save_bytes(g, &b2);
    assert_int_equal(b1.len, b2.len);
    assert_memory_equal(b1.data, b2.data, b1.len);
    mr_buf_free(&b1);
    mr_buf_free(&b2);
    mr_features_free(f);
    mr_features_free(g);

    /* a single name works too */
    assert_ok(fit_keep("- onehot: {columns: [plan]}\n", "customer_id", t, "y", &f, &err));
    assert_false(has_output(f, "customer_id"));
    mr_features_free(f);

    /* a kept column that onehot encodes stays encoded: the outputs have
     * other names, and the transform is the one fitted without keep */
    assert_ok(fit_keep("- onehot: {columns: categorical}\n- drop: {columns: [customer_id]}\n", "[plan]", t, "y", &f,
                              &err));
    assert_true(has_output(f, "plan=x"));
    assert_ok(fit_keep("- onehot: {columns: categorical}\n- drop: {columns: [customer_id]}\n", NULL, t, "y", &g, &err));
    save_bytes(f, &b1);
    save_bytes(g, &b2);
    assert_int_equal(b1.len, b2.len);
    assert_memory_equal(b1.data, b2.data, b1.len);
    mr_buf_free(&b1);
    mr_buf_free(&b2);
    mr_features_free(f);
    mr_features_free(g);

    /* the conflicting case: a step would make a feature under the kept name */
    assert_status(fit_keep("- onehot: {columns: [plan]}\n- standardize: {columns: [a, customer_id]}\n", "[customer_id]",
                              t, "y", &f, &err), MR_E_SCHEMA);
    assert_null(f);
    assert_string_equal(err.key, "customer_id");
    assert_non_null(strstr(err.msg, "under keep"));
    assert_non_null(strstr(err.hint, "take it out of this step's columns"));
    assert_non_null(strstr(err.hint, "take it out of keep"));
    assert_int_equal(err.line, 2);
    assert_int_equal(err.col, 30); /* the name in the step's list */
    mr_error_clear(&err);
    assert_status(fit_keep("- ordinal: {columns: [plan]}\n- drop: {columns: [customer_id]}\n", "[plan]", t, "y", &f, &err), MR_E_SCHEMA);
    assert_string_equal(err.key, "plan");
    mr_error_clear(&err);

    /* an unknown kept column: did-you-mean and its position */
    assert_status(fit_keep("- onehot: {columns: [plan]}\n", "[customer_idd]", t, "y", &f, &err), MR_E_NOT_FOUND);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'customer_id'?"); /* the hint is best effort */
    assert_int_equal(err.line, 1);
    assert_int_equal(err.col, 2);
    mr_error_clear(&err);
    /* the list itself */
    assert_status(fit_keep("- onehot: {columns: [plan]}\n", "[customer_id, customer_id]", t, "y", &f, &err), MR_E_PARSE);
    assert_non_null(strstr(err.msg, "listed twice"));
    mr_error_clear(&err);
    assert_status(fit_keep("- onehot: {columns: [plan]}\n", "[{a: 1}]", t, "y", &f, &err), MR_E_PARSE);
    mr_error_clear(&err);
    mr_table_free(t);
}

/* ---- target encoding never sees a row's own label ----------------------------- */

static double corr(const double *x, const double *y, size_t n)
{
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++) mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        sxy += (x[i] - mx) * (y[i] - my);
        sxx += (x[i] - mx) * (x[i] - mx);
        syy += (y[i] - my) * (y[i] - my);
    }
    return sxy / sqrt(sxx * syy);
}

static void test_target_encoding_no_leak(void **state)
{
    (void)state;
    const size_t n = 4000;
    rng_state = 2024; /* seed printed by the assertion context: fixed */
    mr_column *cat = NULL, *lab = NULL;
    assert_ok(mr_column_new("cat", MR_T_STRING, n, &cat, NULL));
    assert_ok(mr_column_new("y", MR_T_FLOAT64, n, &lab, NULL));
    double *y = mr_malloc(n * sizeof(double));
    assert_alloc(y);
    for (size_t i = 0; i < n; i++) {
        char buf[32];
        int len = snprintf(buf, sizeof(buf), "c%llu", (unsigned long long)(rng() % 800)); /* ~5 rows per category */
        assert_ok(mr_column_append_str(cat, buf, (size_t)len));
        y[i] = (double)(rng() & 1); /* label independent of the category */
        assert_ok(mr_column_append_float64(lab, y[i]));
    }
    mr_column *cols[] = {cat, lab};
    mr_table *t = table_of(cols, 2);
    mr_features_spec *s = spec_of("- target_encode: {columns: [cat], folds: 5, smoothing: 1, seed: 7}\n");
    mr_features *f = NULL;
    mr_table *oof = NULL;
    assert_ok(mr_features_fit_apply_train(s, t, "y", &f, &oof, NULL));
    const double *enc = mr_table_column(oof, "cat#te")->data;
    double r_oof = corr(enc, y, n);
    /* the naive in-sample encoding (full-train statistics) leaks the label */
    mr_table *naive = apply(f, t);
    double r_naive = corr(mr_table_column(naive, "cat#te")->data, y, n);
    fprintf(stderr, "target encoding: out-of-fold corr %.4f, in-sample corr %.4f\n", r_oof, r_naive);
    assert_true(fabs(r_oof) < 0.08);
    assert_true(r_naive > 0.3);
    /* flipping row i's own label never changes row i's encoding */
    for (size_t i = 0; i < n; i += 397) {
        double *yv = lab->data;
        yv[i] = 1 - yv[i];
        mr_features *f2 = NULL;
        mr_table *oof2 = NULL;
        assert_ok(mr_features_fit_apply_train(s, t, "y", &f2, &oof2, NULL));
        const double *e2 = mr_table_column(oof2, "cat#te")->data;
        assert_memory_equal(&e2[i], &enc[i], sizeof(double));
        yv[i] = 1 - yv[i];
        mr_table_free(oof2);
        mr_features_free(f2);
    }
    mr_free(y);
    mr_table_free(naive);
    mr_table_free(oof);
    mr_features_free(f);
    mr_features_spec_free(s);
    mr_table_free(t);
}

/* ---- batch == single row; any thread count -------------------------------------- */

static const char *FULL_SPEC =
    "- impute: {columns: [num], strategy: median, indicator: true}\n"
    "- standardize: {columns: [num]}\n"
    "- clip: {columns: [num], lo: -2, hi: 2}\n"
    "- log1p: {columns: [pos]}\n"
    "- bucketize: {columns: [pos], n_bins: 7}\n"
    "- minmax: {columns: [cnt]}\n"
    "- impute: {columns: [plan], strategy: constant, value: none, indicator: true}\n"
    "- onehot: {columns: [plan], top_k: 3}\n"
    "- ordinal: {columns: [city], max_categories: 10}\n"
    "- hash: {columns: [url], n_features: 8, seed: 5, signed: true}\n"
    "- target_encode: {columns: [zip], folds: 4, smoothing: 5}\n"
    "- onehot: {columns: [flag]}\n";

static mr_table *random_table(size_t n, uint64_t seed)
{
    rng_state = seed;
    mr_column *num, *pos, *cnt, *plan, *city, *url, *zip, *flag, *y;
    assert_ok(mr_column_new("num", MR_T_FLOAT64, n, &num, NULL));
    assert_ok(mr_column_new("pos", MR_T_FLOAT32, n, &pos, NULL));
    assert_ok(mr_column_new("cnt", MR_T_INT64, n, &cnt, NULL));
    assert_ok(mr_column_new("plan", MR_T_STRING, n, &plan, NULL));
    assert_ok(mr_column_new("city", MR_T_STRING, n, &city, NULL));
    assert_ok(mr_column_new("url", MR_T_STRING, n, &url, NULL));
    assert_ok(mr_column_new("zip", MR_T_INT64, n, &zip, NULL));
    assert_ok(mr_column_new("flag", MR_T_BOOL, n, &flag, NULL));
    assert_ok(mr_column_new("y", MR_T_INT64, n, &y, NULL));
    static const char *plans[] = {"basic", "pro", "team", "enterprise", "edu"};
    for (size_t i = 0; i < n; i++) {
        uint64_t r = rng();
        char buf[48];
        if (r % 11 == 0) assert_ok(mr_column_append_null(num));
        else assert_ok(mr_column_append_float64(num, (double)(int64_t)(r % 100000) / 100.0 - 300.0));
        assert_ok(mr_column_append_float32(pos, (float)((r >> 17) % 5000) / 7.0f));
        assert_ok(mr_column_append_int64(cnt, (int64_t)((r >> 5) % 1000)));
        if ((r >> 3) % 13 == 0) assert_ok(mr_column_append_null(plan));
        else assert_ok(mr_column_append_str(plan, plans[(r >> 9) % 5], strlen(plans[(r >> 9) % 5])));
        int len = snprintf(buf, sizeof(buf), "city%llu", (unsigned long long)((r >> 21) % 40));
        assert_ok(mr_column_append_str(city, buf, (size_t)len));
        len = snprintf(buf, sizeof(buf), "https://x/%llu", (unsigned long long)((r >> 30) % 1000));
        assert_ok(mr_column_append_str(url, buf, (size_t)len));
        assert_ok(mr_column_append_int64(zip, (int64_t)((r >> 40) % 60)));
        assert_ok(mr_column_append_bool(flag, (int)((r >> 50) & 1)));
        assert_ok(mr_column_append_int64(y, (int64_t)((r >> 52) % 3 == 0)));
    }
    mr_column *cols[] = {num, pos, cnt, plan, city, url, zip, flag, y};
    return table_of(cols, 9);
}

static void test_batch_equals_row(void **state)
{
    (void)state;
    mr_table *train = random_table(5000, 99), *test = random_table(20000, 100);
    mr_features *f = fit(FULL_SPEC, train, "y");
    mr_pool_shutdown();
    mr_table *serial = apply(f, test);
    assert_ok(mr_pool_init(4, NULL));
    mr_table *par = apply(f, test);
    size_t n_out = mr_features_n_outputs(f), n_in = mr_features_n_inputs(f);
    assert_int_equal(par->n_cols, n_out);
    for (size_t j = 0; j < n_out; j++)
        assert_memory_equal(serial->cols[j]->data, par->cols[j]->data, test->n_rows * sizeof(double));
    /* row path, cells from the table */
    mr_cell *cells = mr_calloc(n_in, sizeof(mr_cell));
    assert_alloc(cells);
    double *vec = mr_calloc(n_out, sizeof(double));
    assert_alloc(vec);
    const mr_column **in = mr_calloc(n_in, sizeof(*in));
    assert_alloc(in);
    for (size_t k = 0; k < n_in; k++) in[k] = mr_table_column(test, mr_features_input_at(f, k)->name);
    mr_row_view row = {.cells = cells, .n_cells = n_in};
    for (size_t i = 0; i < test->n_rows; i++) {
        for (size_t k = 0; k < n_in; k++) mr_features_cell(in[k], i, &cells[k]);
        assert_ok(mr_features_apply_row(f, &row, vec, NULL));
        for (size_t j = 0; j < n_out; j++) {
            double b = ((const double *)par->cols[j]->data)[i];
            if (memcmp(&b, &vec[j], sizeof(double)) != 0) {
                fprintf(stderr, "row %zu output %s: batch %.17g row %.17g\n", i, mr_features_output_at(f, j)->name, b, vec[j]);
                fail();
            }
        }
    }
    /* row path, cells as a server builds them: strings for everything
     * categorical (zip "17", flag "true"), numbers as NUM */
    for (size_t i = 0; i < 200; i++) {
        char zbuf[8][32];
        for (size_t k = 0; k < n_in; k++) {
            mr_features_cell(in[k], i, &cells[k]);
            if (mr_features_input_at(f, k)->categorical && cells[k].kind == MR_CELL_INT) {
                int len = snprintf(zbuf[k], sizeof(zbuf[k]), "%lld", (long long)cells[k].i);
                cells[k] = (mr_cell){.kind = MR_CELL_STR, .str = zbuf[k], .len = (size_t)len};
            } else if (mr_features_input_at(f, k)->categorical && cells[k].kind == MR_CELL_BOOL) {
                cells[k] = (mr_cell){.kind = MR_CELL_STR, .str = cells[k].i ? "true" : "false", .len = cells[k].i ? 4 : 5};
            } else if (cells[k].kind == MR_CELL_INT) {
                cells[k] = (mr_cell){.kind = MR_CELL_NUM, .num = (double)cells[k].i};
            }
        }
        assert_ok(mr_features_apply_row(f, &row, vec, NULL));
        for (size_t j = 0; j < n_out; j++) {
            double b = ((const double *)par->cols[j]->data)[i];
            assert_memory_equal(&b, &vec[j], sizeof(double));
        }
    }
    /* a string where a number is expected */
    mr_error err;
    mr_error_init(&err);
    cells[0] = (mr_cell){.kind = MR_CELL_STR, .str = "12", .len = 2};
    assert_status(mr_features_apply_row(f, &row, vec, &err), MR_E_INVALID_ARG);
    assert_string_equal(err.key, "num");
    mr_error_clear(&err);
    row.n_cells = n_in - 1;
    assert_status(mr_features_apply_row(f, &row, vec, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    mr_pool_shutdown();
    mr_free(in);
    mr_free(cells);
    mr_free(vec);
    mr_table_free(serial);
    mr_table_free(par);
    mr_features_free(f);
    mr_table_free(train);
    mr_table_free(test);
}

/* ---- artifact ------------------------------------------------------------------ */

static void test_save_load(void **state)
{
    (void)state;
    mr_table *train = random_table(3000, 7), *test = random_table(500, 8);
    mr_features *f = fit(FULL_SPEC, train, "y"), *f2 = fit(FULL_SPEC, train, "y");
    mr_buf a, b, c;
    mr_buf_init(&a);
    mr_buf_init(&b);
    mr_buf_init(&c);
    assert_ok(mr_features_save(f, &a));
    assert_ok(mr_features_save(f2, &b));
    assert_int_equal(a.len, b.len);
    assert_memory_equal(a.data, b.data, a.len); /* same fit, same bytes */
    assert_memory_equal(a.data, "MRFT\x01\x00\x00\x00", 8);
    mr_features *g = NULL;
    assert_ok(mr_features_load(a.data, a.len, &g, NULL));
    assert_ok(mr_features_save(g, &c));
    assert_int_equal(a.len, c.len);
    assert_memory_equal(a.data, c.data, a.len);
    mr_table *o1 = apply(f, test), *o2 = apply(g, test);
    for (size_t j = 0; j < o1->n_cols; j++) {
        assert_string_equal(o1->cols[j]->name, o2->cols[j]->name);
        assert_memory_equal(o1->cols[j]->data, o2->cols[j]->data, test->n_rows * sizeof(double));
    }
    for (size_t j = 0; j < mr_features_n_outputs(f); j++) {
        assert_int_equal(mr_features_output_at(f, j)->categorical, mr_features_output_at(g, j)->categorical);
        assert_int_equal(mr_features_output_at(f, j)->n_categories, mr_features_output_at(g, j)->n_categories);
    }
    /* every truncation is MR_E_CORRUPT */
    mr_error err;
    for (size_t len = 0; len < a.len; len++) {
        mr_features *h = NULL;
        mr_error_init(&err);
        assert_status(mr_features_load(a.data, len, &h, &err), MR_E_CORRUPT);
        assert_null(h);
    }
    /* flipped bytes fail the checksum; with the checksum fixed up, the
     * structural checks must still reject or accept without crashing */
    char *copy = mr_malloc(a.len);
    assert_alloc(copy);
    size_t rejected = 0;
    for (size_t pos = 0; pos < a.len - 8; pos += 3) {
        memcpy(copy, a.data, a.len);
        copy[pos] ^= (char)0x5a;
        mr_features *h = NULL;
        mr_error_init(&err);
        mr_status rc = mr_features_load(copy, a.len, &h, &err);
        assert_status(rc, MR_E_CORRUPT);
        uint64_t sum = mr__ml_hash64(copy, a.len - 8, 0);
        for (int k = 0; k < 8; k++) copy[a.len - 8 + k] = (char)(uint8_t)(sum >> (8 * k));
        mr_error_init(&err);
        rc = mr_features_load(copy, a.len, &h, &err);
        if (rc != MR_OK) {
            assert_status(rc, MR_E_CORRUPT);
            assert_true(strstr(err.msg, "features artifact: ") == err.msg);
            rejected++;
        }
        mr_features_free(h);
    }
    assert_true(rejected > 0);
    mr_error_init(&err);
    memcpy(copy, a.data, a.len);
    copy[4] = 9;
    mr_features_free(g);
    assert_status(mr_features_load(copy, a.len, &g, &err), MR_E_CORRUPT);
    assert_null(g);
    assert_non_null(strstr(err.msg, "version 9"));
    mr_free(copy);
    mr_table_free(o1);
    mr_table_free(o2);
    mr_buf_free(&a);
    mr_buf_free(&b);
    mr_buf_free(&c);
    mr_features_free(f);
    mr_features_free(f2);
    mr_table_free(train);
    mr_table_free(test);
}

/* keep's conflicts with the steps that need no data are found by
 * mr_features_spec_set_keep itself (the features op checks them when
 * millrace.yaml is loaded), at the name in the step's list. */
static mr_status keep_err(const char *steps, const char *keep, mr_error *err)
{
    mr_features_spec *s = spec_of(steps);
    mr_value *k = NULL;
    assert_ok(mr_yaml_parse(keep, strlen(keep), "keep.yaml", &k, NULL));
    mr_status rc = mr_features_spec_set_keep(s, k, err);
    mr_value_free(k);
    mr_features_spec_free(s);
    return rc;
}

static void test_keep_conflicts_without_data(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    /* every step whose output keeps the column's name, whatever its type */
    static const char *const own_name[] = {
        "- standardize: {columns: [a, id]}\n", "- minmax: {columns: [a, id]}\n",
        "- log1p: {columns: [a, id]}\n",       "- clip: {columns: [a, id], lo: 0}\n",
        "- bucketize: {columns: [a, id]}\n",   "- ordinal: {columns: [a, id]}\n",
    };
    for (size_t k = 0; k < sizeof(own_name) / sizeof(*own_name); k++) {
        assert_status(keep_err(own_name[k], "[x, id]", &err), MR_E_SCHEMA);
        assert_string_equal(err.key, "id");
        assert_non_null(strstr(err.msg, "column 'id' is under keep"));
        assert_non_null(strstr(err.hint, "take it out of this step's columns"));
        assert_string_equal(err.file, "f.yaml");
        assert_int_equal(err.line, 1);
        assert_int_equal(err.col, (long)(strchr(own_name[k], ']') - own_name[k]) - 1); /* the name "id" */
        mr_error_clear(&err);
    }
    /* the position is the step's, in a longer list */
    assert_status(keep_err("- onehot: {columns: [plan]}\n- ordinal: {columns: [city]}\n", "city", &err), MR_E_SCHEMA);
    assert_int_equal(err.line, 2);
    assert_int_equal(err.col, 23);
    assert_non_null(strstr(err.msg, "features: ordinal: column 'city'"));
    mr_error_clear(&err);
    /* encodings of other names, drop, impute (its output depends on the
     * column's type: the fit decides) and selectors are no conflict here */
    static const char *const fine[] = {
        "- onehot: {columns: [id]}\n", "- hash: {columns: [id]}\n",  "- target_encode: {columns: [id]}\n",
        "- drop: {columns: [id]}\n",   "- impute: {columns: [id]}\n", "- standardize: {columns: numeric}\n",
    };
    for (size_t k = 0; k < sizeof(fine) / sizeof(*fine); k++) {
        if (keep_err(fine[k], "[id]", &err) != MR_OK) fprintf(stderr, "%s: %s\n", fine[k], err.msg);
        assert_ok(err.code);
    }
}

/* Messages of the step parser say what was expected and what was found. */
static void test_spec_messages(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    static const struct {
        const char *yaml, *msg;
        long line, col;
    } cases[] = {
        {"- bucketize: {columns: [a], n_bins: 1}\n", "features: bucketize: 'n_bins' must be an integer in 2..65536, got \"1\"", 1, 37},
        {"- hash: {columns: [a], signed: 1}\n", "features: hash: 'signed' must be true or false, got \"1\"", 1, 32},
        {"- hash: {columns: [a], seed: -2}\n", "features: hash: 'seed' must be a non-negative integer, got \"-2\"", 1, 30},
        {"- clip: {columns: [a], lo: x}\n", "features: clip: 'lo' must be a number, got \"x\"", 1, 28},
        {"- clip: {columns: [a], lo: 3, hi: 1}\n", "features: clip: needs lo <= hi, got lo 3 and hi 1", 1, 35},
        {"- target_encode: {columns: [a], smoothing: -1}\n",
         "features: target_encode: 'smoothing' must be a finite number >= 0, got \"-1\"", 1, 44},
        {"- impute: {columns: [a], strategy: 3}\n",
         "features: impute: 'strategy' must be mean, median, most_frequent or constant, got \"3\"", 1, 36},
        {"- impute: {columns: [a], value: 0}\n", "features: impute: 'value' needs strategy constant, got strategy mean (the default)", 1, 33},
        {"- onehot: {columns: [a, {b: 1}]}\n", "features: onehot: 'columns' must be a list of column names (strings), got a mapping", 1, 25},
        {"- onehot: {columns: []}\n", "features: onehot: 'columns' must be a non-empty list of column names or numeric, categorical, all, got a list", 1, 21},
        {"- onehot: [a]\n", "features: onehot: expected a mapping of parameters (at least 'columns'), got a list", 1, 11},
        {"- {onehot: {columns: [a]}, log1p: {columns: [b]}}\n", "features: each step must be a one-key mapping {step: {params}}, got a mapping of 2 keys", 1, 3},
    };
    for (size_t k = 0; k < sizeof(cases) / sizeof(*cases); k++) {
        assert_status(spec_err(cases[k].yaml, &err), MR_E_PARSE);
        assert_string_equal(err.msg, cases[k].msg);
        assert_int_equal(err.line, cases[k].line);
        assert_int_equal(err.col, cases[k].col);
        mr_error_clear(&err);
    }
}

/* ---- errors ---------------------------------------------------------------------- */

static void test_errors(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    assert_status(spec_err("- standardise: {columns: [a]}\n", &err), MR_E_PARSE);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'standardize'?"); /* the hint is best effort */
    assert_int_equal(err.line, 1);
    assert_string_equal(err.file, "f.yaml");
    mr_error_clear(&err);
    assert_status(spec_err("- log1p: {columns: [a]}\n- impute: {columns: [a], stratgy: mean}\n", &err), MR_E_PARSE);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'strategy'?"); /* the hint is best effort */
    assert_int_equal(err.line, 2);
    mr_error_clear(&err);
    assert_status(spec_err("- impute: {columns: [a], strategy: meen}\n", &err), MR_E_PARSE);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'mean'?"); /* the hint is best effort */
    mr_error_clear(&err);
    assert_status(spec_err("- bucketize: {columns: [a], n_bins: 1}\n", &err), MR_E_PARSE);
    mr_error_clear(&err);
    assert_status(spec_err("- clip: {columns: [a], lo: 3, hi: 1}\n", &err), MR_E_PARSE);
    mr_error_clear(&err);
    assert_status(spec_err("- onehot: {columns: numerics}\n", &err), MR_E_PARSE);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'numeric'?"); /* the hint is best effort */
    mr_error_clear(&err);

    mr_table *t = basic_train();
    mr_features_spec *s = spec_of("- log1p: {columns: [income]}\n- standardize: {columns: [agee]}\n");
    mr_features *f = NULL;
    assert_status(mr_features_fit(s, t, "y", &f, &err), MR_E_NOT_FOUND);
    if (!mr_test_fault_fired()) assert_string_equal(err.hint, "did you mean 'age'?"); /* the hint is best effort */
    assert_int_equal(err.line, 2);
    assert_int_equal(err.col, 27);
    mr_error_clear(&err);
    mr_features_spec_free(s);
    s = spec_of("- standardize: {columns: [plan]}\n");
    assert_status(mr_features_fit(s, t, "y", &f, &err), MR_E_SCHEMA);
    assert_string_equal(err.key, "plan");
    mr_error_clear(&err);
    mr_features_spec_free(s);
    s = spec_of("- onehot: {columns: [age]}\n");
    assert_status(mr_features_fit(s, t, "y", &f, &err), MR_E_SCHEMA);
    mr_error_clear(&err);
    mr_features_spec_free(s);
    s = spec_of("- ordinal: {columns: [plan]}\n- onehot: {columns: [plan]}\n");
    assert_status(mr_features_fit(s, t, "y", &f, &err), MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "already encoded"));
    mr_error_clear(&err);
    mr_features_spec_free(s);
    s = spec_of("- target_encode: {columns: [plan]}\n");
    assert_status(mr_features_fit(s, t, NULL, &f, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    assert_status(mr_features_fit(s, t, "yy", &f, &err), MR_E_NOT_FOUND);
    mr_error_clear(&err);
    mr_features_spec_free(s);
    s = spec_of("- standardize: {columns: [y]}\n");
    assert_status(mr_features_fit(s, t, "y", &f, &err), MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "label"));
    mr_error_clear(&err);
    mr_features_spec_free(s);

    /* apply: missing column, wrong type */
    f = fit(BASIC_SPEC, t, "y");
    double age[] = {1};
    const char *plan[] = {"x"}, *city[] = {"a"}, *inc[] = {"10"};
    mr_column *c1[] = {fcol("age", age, 1), scol("plan", plan, 1), scol("city", city, 1)};
    mr_table *t1 = table_of(c1, 3);
    mr_table *o = NULL;
    assert_status(mr_features_apply(f, t1, &o, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.msg, "income"));
    mr_error_clear(&err);
    assert_ok(mr_table_add_column(t1, scol("income", inc, 1), NULL));
    assert_status(mr_features_apply(f, t1, &o, &err), MR_E_SCHEMA);
    assert_null(o);
    mr_error_clear(&err);
    mr_table_free(t1);
    mr_features_free(f);
    mr_table_free(t);
}

/* ---- allocation failures: every one gives MR_E_NOMEM and leaks nothing ------- */

static void test_oom(void **state)
{
    (void)state;
    mr_table *t = random_table(300, 3);
    mr_features_spec *s = spec_of(FULL_SPEC);
    mr_buf b;
    mr_buf_init(&b);
    mr_features *ref = fit(FULL_SPEC, t, "y");
    assert_ok(mr_features_save(ref, &b));
    int done = 0;
    long k = 1;
    for (; !done && k < 100000; k++) {
        mr_features *f = NULL, *g = NULL;
        mr_table *tr = NULL, *o = NULL;
        mr_buf b2;
        mr_buf_init(&b2);
        mr_error err;
        mr_error_init(&err);
        mr_alloc_fail_after(k);
        mr_status rc = mr_features_fit_apply_train(s, t, "y", &f, &tr, &err);
        if (rc != MR_OK) assert_true(f == NULL && tr == NULL);
        if (rc == MR_OK && (rc = mr_features_apply(f, t, &o, &err)) != MR_OK) assert_null(o);
        if (rc == MR_OK) rc = mr_features_save(f, &b2);
        if (rc == MR_OK && (rc = mr_features_load(b.data, b.len, &g, &err)) != MR_OK) assert_null(g);
        if (rc == MR_OK) done = 1;
        else if (rc != MR_E_NOMEM) {
            fprintf(stderr, "allocation %ld: %s (%s)\n", k, mr_status_name(rc), err.msg);
            fail();
        }
        mr_alloc_fail_after(0);
        mr_buf_free(&b2);
        mr_table_free(tr);
        mr_table_free(o);
        mr_features_free(f);
        mr_features_free(g);
    }
    assert_true(done);
    fprintf(stderr, "oom: %ld failing allocations each returned MR_E_NOMEM\n", k - 2);
    mr_buf_free(&b);
    mr_features_free(ref);
    mr_features_spec_free(s);
    mr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_hand_values),
        cmocka_unit_test(test_numeric_steps),
        cmocka_unit_test(test_categorical_steps),
        cmocka_unit_test(test_selectors_and_passthrough),
        cmocka_unit_test(test_no_column_lost),
        cmocka_unit_test(test_keep),
        cmocka_unit_test(test_keep_conflicts_without_data),
        cmocka_unit_test(test_spec_messages),
        cmocka_unit_test(test_target_encoding_no_leak),
        cmocka_unit_test(test_batch_equals_row),
        cmocka_unit_test(test_save_load),
        cmocka_unit_test(test_errors),
        cmocka_unit_test(test_oom),
    };
    return mr_test_run(tests, NULL, NULL);
}
