/* Unit tests for the server's input monitor (src/serve/monitor.c) without
 * sockets: a bundle with a training profile; rows parsed as /v1/predict
 * parses them; the counters (unseen category, out of range, float for an
 * integer column, extra fields in row and columnar bodies) and the first
 * event's field and row; strict scoring answering 422 while clean jobs of
 * the same batch are scored; drift near 0 for training-like values and
 * over the threshold for shifted ones; the Prometheus lines. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/bundle.h"
#include "millrace/features.h"
#include "millrace/model.h"
#include "millrace/profile.h"
#include "millrace/spec.h"
#include "serve/serve_int.h"

typedef struct fixture {
    mr_bundle *b;
} fixture;

/* x: uniform integers 0..99; plan: a, b, c; y from both. */
static mr_table *train_table(void)
{
    mr_table *t = NULL;
    mr_column *x = NULL, *plan = NULL, *y = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("x", MR_T_INT64, 3000, &x, NULL));
    assert_ok(mr_column_new("plan", MR_T_STRING, 3000, &plan, NULL));
    assert_ok(mr_column_new("y", MR_T_FLOAT64, 3000, &y, NULL));
    static const char *const plans[] = {"a", "b", "c"};
    for (int i = 0; i < 3000; i++) {
        int xv = (i * 37) % 100;
        const char *p = plans[i % 3];
        assert_ok(mr_column_append_int64(x, xv));
        assert_ok(mr_column_append_str(plan, p, 1));
        assert_ok(mr_column_append_float64(y, (xv > 50) ^ (i % 3 == 0) ? 1.0 : 0.0));
    }
    assert_ok(mr_table_add_column(t, x, NULL));
    assert_ok(mr_table_add_column(t, plan, NULL));
    assert_ok(mr_table_add_column(t, y, NULL));
    return t;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    mr_table *t = train_table();
    static const char yaml[] = "- onehot: {columns: [plan]}\n";
    mr_value *v = NULL;
    mr_features_spec *spec = NULL;
    mr_features *fx = NULL;
    mr_table *xt = NULL;
    assert_ok(mr_yaml_parse(yaml, strlen(yaml), "f.yaml", &v, NULL));
    assert_ok(mr_features_spec_parse(v, "f.yaml", &spec, NULL));
    assert_ok(mr_features_fit_apply_train(spec, t, "y", &fx, &xt, NULL));
    mr_column *ycopy = NULL;
    assert_ok(mr_column_slice(mr_table_column(t, "y"), 0, t->n_rows, &ycopy, NULL));
    assert_ok(mr_table_add_column(xt, ycopy, NULL));
    mr_train_opts o;
    mr_train_opts_init(&o);
    o.kind = "linear";
    o.label = "y";
    mr_model *m = NULL;
    assert_ok(mr_model_train(xt, NULL, &o, &m, NULL));
    const char *names[] = {"x", "plan"};
    const int cat[] = {0, 1};
    mr_buf prof, bytes;
    mr_buf_init(&prof);
    mr_buf_init(&bytes);
    assert_ok(mr_profile_build(t, names, cat, 2, &prof, NULL));
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = m;
    bb.features = fx;
    bb.profile_json = prof.data;
    assert_ok(mr_bundle_write(&bb, &bytes, NULL));
    assert_ok(mr_bundle_from_bytes(bytes.data, bytes.len, &f->b, NULL));
    mr_buf_free(&prof);
    mr_buf_free(&bytes);
    mr_model_free(m);
    mr_features_free(fx);
    mr_features_spec_free(spec);
    mr_value_free(v);
    mr_table_free(xt);
    mr_table_free(t);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mr_bundle_free(f->b);
    free(f);
    return 0;
}

static void parse(const char *body, mr__serve_req *req)
{
    mr_buf err;
    mr_buf_init(&err);
    memset(req, 0, sizeof(*req));
    int st = mr__serve_parse_body(body, strlen(body), 1000, req, &err);
    if (st == 500) assert_status(MR_E_NOMEM, MR_OK);
    if (st != 0) fail_msg("parse %s: %d %s", body, st, err.data);
    mr_buf_free(&err);
}

static void test_counters(void **state)
{
    fixture *f = *state;
    mr__serve_monitor *m = mr__monitor_new(f->b);
    assert_alloc(m);
    mr__serve_req q;
    char why[256];
    const char *field = NULL;
    long row = -1;
    parse("{\"rows\": [{\"x\": 5, \"plan\": \"a\"}, {\"x\": 50, \"plan\": \"b\"}]}", &q);
    assert_int_equal(mr__monitor_rows(m, &q, why, sizeof(why), &field, &row), 0);
    assert_string_equal(why, "");
    mr__serve_req_clear(&q);
    parse("{\"rows\": [{\"x\": 5, \"plan\": \"a\"}, {\"x\": 500, \"plan\": \"zz\", \"extra\": 1}, {\"x\": 7.5}]}", &q);
    assert_int_equal(mr__monitor_rows(m, &q, why, sizeof(why), &field, &row), 4);
    assert_string_equal(field, "extra"); /* the row's fields first, then its inputs */
    assert_int_equal(row, 1);
    assert_non_null(strstr(why, "no input of the model"));
    mr__serve_req_clear(&q);
    row = -1;
    parse("{\"columns\": {\"x\": [1, 2], \"plan\": [\"a\", \"q\"], \"bogus\": [0, 0]}}", &q);
    assert_int_equal(mr__monitor_rows(m, &q, why, sizeof(why), &field, &row), 3); /* 2 extra + 1 unseen */
    mr__serve_req_clear(&q);
    mr_buf mt;
    mr_buf_init(&mt);
    mr__monitor_metrics(m, &mt);
    if (mt.failed) mr_test_accept_if_oom(0); /* a status-less writer: its buffer says out of memory */
    assert_false(mt.failed);
    assert_non_null(strstr(mt.data, "millrace_input_unseen_category_total{column=\"plan\"} 2\n"));
    assert_non_null(strstr(mt.data, "millrace_input_out_of_range_total{column=\"x\"} 1\n"));
    assert_non_null(strstr(mt.data, "millrace_input_float_for_int_total{column=\"x\"} 1\n"));
    assert_non_null(strstr(mt.data, "millrace_input_extra_fields_total 3\n"));
    assert_null(strstr(mt.data, "millrace_input_psi{")); /* fewer than 100 values yet */
    mr_buf_free(&mt);
    mr__monitor_free(m);
}

static void test_strict_scoring(void **state)
{
    fixture *f = *state;
    mr__serve_monitor *m = mr__monitor_new(f->b);
    assert_alloc(m);
    mr__serve_job a, b;
    memset(&a, 0, sizeof(a));
    memset(&b, 0, sizeof(b));
    mr_buf_init(&a.body);
    mr_buf_init(&b.body);
    parse("{\"rows\": [{\"x\": 5, \"plan\": \"a\"}]}", &a.req);
    parse("{\"rows\": [{\"x\": 5, \"plan\": \"a\"}, {\"x\": 6, \"plan\": \"enterprise\"}]}", &b.req);
    mr__serve_job *jobs[2] = {&a, &b};
    size_t rows = 0;
    mr__serve_score_observed(jobs, 2, f->b, "v", 1, m, 1, NULL, &rows);
    if (a.status == 500 || b.status == 500) mr_test_accept_if_oom(0);
    assert_int_equal(a.status, 200);
    assert_int_equal(b.status, 422);
    assert_int_equal(rows, 1);
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *e = json_loadb(b.body.data, b.body.len, 0, NULL);
    if (!e) mr_test_accept_if_oom(oom0);
    assert_non_null(e);
    assert_string_equal(json_string_value(json_object_get(e, "field")), "plan");
    assert_int_equal(json_integer_value(json_object_get(e, "row")), 1);
    json_decref(e);
    /* without strict the same batch is scored, and counted */
    a.status = b.status = 0;
    mr__serve_score_observed(jobs, 2, f->b, "v", 1, m, 0, NULL, &rows);
    if (a.status == 500 || b.status == 500) mr_test_accept_if_oom(0);
    assert_int_equal(b.status, 200);
    assert_int_equal(rows, 3);
    mr__serve_req_clear(&a.req);
    mr__serve_req_clear(&b.req);
    mr_buf_free(&a.body);
    mr_buf_free(&b.body);
    mr__monitor_free(m);
}

static double drift_of(mr__serve_monitor *m, const char *col)
{
    mr_buf d;
    mr_buf_init(&d);
    mr__monitor_drift_json(m, "v", &d);
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *doc = json_loadb(d.data ? d.data : "", d.len, 0, NULL);
    if (!doc) mr_test_accept_if_oom(oom0);
    assert_non_null(doc);
    double psi = NAN;
    size_t k;
    json_t *c;
    json_array_foreach(json_object_get(doc, "columns"), k, c) if (!strcmp(json_string_value(json_object_get(c, "name")), col))
        psi = json_is_number(json_object_get(c, "psi")) ? json_number_value(json_object_get(c, "psi")) : NAN;
    json_decref(doc);
    mr_buf_free(&d);
    return psi;
}

static void test_drift(void **state)
{
    fixture *f = *state;
    mr__serve_monitor *same = mr__monitor_new(f->b), *moved = mr__monitor_new(f->b);
    assert_alloc(same);
    assert_alloc(moved);
    assert_true(isnan(drift_of(same, "x")));
    char body[64];
    for (int i = 0; i < 2000; i++) {
        mr__serve_req q;
        snprintf(body, sizeof(body), "{\"rows\": [{\"x\": %d, \"plan\": \"a\"}]}", (i * 53) % 100);
        parse(body, &q);
        mr__monitor_rows(same, &q, NULL, 0, NULL, NULL);
        mr__serve_req_clear(&q);
        snprintf(body, sizeof(body), "{\"rows\": [{\"x\": %d, \"plan\": \"b\"}]}", 80 + (i * 53) % 20);
        parse(body, &q);
        mr__monitor_rows(moved, &q, NULL, 0, NULL, NULL);
        mr__serve_req_clear(&q);
    }
    assert_true(drift_of(same, "x") < 0.05);
    assert_true(drift_of(moved, "x") > MR_PSI_SHIFTED);
    assert_true(drift_of(same, "plan") > MR_PSI_SHIFTED); /* every plan "a": not the training mix */
    mr__monitor_free(same);
    mr__monitor_free(moved);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_counters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_strict_scoring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drift, setup, teardown),
    };
    return mr_test_run(tests, NULL, NULL);
}
