/* Unit tests for the MLflow and Open Inference protocols of the model server
 * (src/serve/protocol.c): their paths, methods, Content-Type rule and
 * header checks; every MLflow form (dataframe_split with and without
 * columns and index, dataframe_records with keys left out, instances and
 * inputs as records, lists and columns, text/csv with quoting) and every OIP
 * form (columns [N] and [N, 1], flat and nested; a [N, n_inputs] matrix)
 * scored through mr__serve_score to the very numbers /v1/predict prints for
 * the same rows, alone and in a batch with /v1/predict jobs; multiclass
 * answers; the echo of an OIP id (with escapes) and the outputs asked
 * for; malformed requests answered with each protocol's error shape and
 * status; the model's /v2 name, its metadata documents and the price of a
 * body. Bundles are trained here from a fixed seed (SEED). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/bundle.h"
#include "millrace/features.h"
#include "millrace/model.h"
#include "millrace/spec.h"
#include "serve/serve_int.h"

#define SEED 4242u

/* ---- bundles ----------------------------------------------------------------------- */

typedef struct fixture {
    mr_bundle *mixed; /* x1 (float, nulls), x2 (float), plan (string category), n (int64); features; binary; "proto" */
    mr_bundle *num;   /* a, b (floats) without features; regression; no name */
    mr_bundle *multi; /* a, b without features; multiclass (3); named "has space" */
} fixture;

static uint64_t rs;
static double urand(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rs >> 11) / 9007199254740992.0;
}

static mr_bundle *build(mr_model *m, mr_features *fx, const char *name)
{
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = m;
    bb.features = fx;
    bb.name = name;
    mr_buf bytes;
    mr_buf_init(&bytes);
    mr_bundle *b = NULL;
    mr_error err;
    mr_error_init(&err);
    if (mr_bundle_write(&bb, &bytes, &err) != MR_OK || mr_bundle_from_bytes(bytes.data, bytes.len, &b, &err) != MR_OK)
        fail_msg("bundle: %s", err.msg);
    mr_buf_free(&bytes);
    return b;
}

static mr_model *train(mr_table *t, const char *params)
{
    mr_error err;
    mr_error_init(&err);
    mr_value *pv = NULL;
    mr_model *m = NULL;
    mr_train_opts o;
    mr_train_opts_init(&o);
    o.label = "y";
    o.num_threads = 1;
    if (mr_yaml_parse(params, strlen(params), "params", &pv, &err) != MR_OK) fail_msg("params: %s", err.msg);
    o.params = pv;
    if (mr_model_train(t, NULL, &o, &m, &err) != MR_OK) fail_msg("train: %s", err.msg);
    mr_value_free(pv);
    return m;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    mr_error err;
    mr_error_init(&err);
    rs = SEED;
    size_t n = 500;
    mr_table *t = NULL, *u = NULL, *xt = NULL;
    mr_column *x1, *x2, *plan, *cnt, *y, *a, *b, *ya, *yc;
    mr_table_new(&t, NULL);
    mr_table_new(&u, NULL);
    mr_column_new("x1", MR_T_FLOAT64, n, &x1, NULL);
    mr_column_new("x2", MR_T_FLOAT64, n, &x2, NULL);
    mr_column_new("plan", MR_T_STRING, n, &plan, NULL);
    mr_column_new("n", MR_T_INT64, n, &cnt, NULL);
    mr_column_new("y", MR_T_FLOAT64, n, &y, NULL);
    mr_column_new("a", MR_T_FLOAT64, n, &a, NULL);
    mr_column_new("b", MR_T_FLOAT64, n, &b, NULL);
    mr_column_new("y", MR_T_FLOAT64, n, &ya, NULL);
    static const char *plans[] = {"basic", "pro", "max", "free"};
    for (size_t i = 0; i < n; i++) {
        double p = urand() * 4 - 2, q = urand() * 4 - 2;
        int k = (int)(urand() * 4);
        if (i % 13 == 0) mr_column_append_null(x1);
        else mr_column_append_float64(x1, p);
        mr_column_append_float64(x2, q);
        mr_column_append_str(plan, plans[k], strlen(plans[k]));
        mr_column_append_int64(cnt, (int64_t)(i % 20));
        mr_column_append_float64(y, p * q + (k == 1) > 0 ? 1.0 : 0.0);
        mr_column_append_float64(a, p);
        mr_column_append_float64(b, q);
        mr_column_append_float64(ya, p + 0.5 * q);
    }
    mr_table_add_column(t, x1, NULL);
    mr_table_add_column(t, x2, NULL);
    mr_table_add_column(t, plan, NULL);
    mr_table_add_column(t, cnt, NULL);
    mr_table_add_column(t, y, NULL);
    mr_table_add_column(u, a, NULL);
    mr_table_add_column(u, b, NULL);
    mr_table_add_column(u, ya, NULL);
    static const char steps[] = "- impute: {columns: [x1], strategy: median, indicator: true}\n"
                                "- onehot: {columns: [plan]}\n";
    mr_value *sv = NULL;
    mr_features_spec *spec = NULL;
    mr_features *fx = NULL;
    if (mr_yaml_parse(steps, strlen(steps), "steps", &sv, &err) != MR_OK ||
        mr_features_spec_parse(sv, "steps", &spec, &err) != MR_OK ||
        mr_features_fit_apply_train(spec, t, "y", &fx, &xt, &err) != MR_OK)
        fail_msg("features: %s", err.msg);
    mr_column *ycopy = NULL;
    mr_column_slice(mr_table_column(t, "y"), 0, t->n_rows, &ycopy, NULL);
    mr_table_add_column(xt, ycopy, NULL);
    mr_model *m = train(xt, "{objective: binary, num_iterations: 8, num_leaves: 7, min_data_in_leaf: 5}");
    f->mixed = build(m, fx, "proto");
    mr_model_free(m);
    m = train(u, "{objective: regression, num_iterations: 6, num_leaves: 5, min_data_in_leaf: 5}");
    f->num = build(m, NULL, NULL);
    mr_model_free(m);
    /* classes 0, 1, 2 from a */
    mr_column_new("y", MR_T_FLOAT64, n, &yc, NULL);
    for (size_t i = 0; i < n; i++) {
        double v = ((const double *)a->data)[i];
        mr_column_append_float64(yc, v < -0.7 ? 0.0 : v < 0.7 ? 1.0 : 2.0);
    }
    mr_table *w = NULL;
    mr_table_new(&w, NULL);
    mr_column *a2 = NULL, *b2 = NULL;
    mr_column_slice(a, 0, n, &a2, NULL);
    mr_column_slice(b, 0, n, &b2, NULL);
    mr_table_add_column(w, a2, NULL);
    mr_table_add_column(w, b2, NULL);
    mr_table_add_column(w, yc, NULL);
    m = train(w, "{objective: multiclass, num_class: 3, num_iterations: 4, num_leaves: 5, min_data_in_leaf: 5}");
    f->multi = build(m, NULL, "has space");
    mr_model_free(m);
    mr_table_free(w);
    mr_features_free(fx);
    mr_features_spec_free(spec);
    mr_value_free(sv);
    mr_table_free(xt);
    mr_table_free(t);
    mr_table_free(u);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mr_bundle_free(f->mixed);
    mr_bundle_free(f->num);
    mr_bundle_free(f->multi);
    free(f);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------ */

/* The answers are checked through documents of the test's own, parsed with
 * plain malloc: the allocation-failure torture then fails only the
 * library's allocations, and never one inside jansson's lexer in a check
 * (jansson 2.14 overruns its buffer when an allocation fails there while it
 * reads a long string with escapes). load's documents go with unload. */
static json_malloc_t lib_malloc;
static json_free_t lib_free;

static void plain_alloc(int on)
{
    if (on) {
        json_get_alloc_funcs(&lib_malloc, &lib_free);
        json_set_alloc_funcs(malloc, free);
    } else {
        json_set_alloc_funcs(lib_malloc, lib_free);
    }
}

static json_t *load(const char *text, size_t len)
{
    json_error_t je;
    plain_alloc(1);
    json_t *doc = json_loadb(text, len, JSON_DECODE_ANY, &je);
    plain_alloc(0);
    if (!doc) fail_msg("not JSON (%s): %.*s", je.text, (int)len, text);
    return doc;
}

static void unload(json_t *doc)
{
    plain_alloc(1);
    json_decref(doc);
    plain_alloc(0);
}

static mr__proto_call call(const mr_bundle *b, mr__serve_endpoint ep, int csv)
{
    mr__proto_call pc = {ep, csv, b, "proto", 64};
    return pc;
}

/* Parses body for pc into j; under torture an out-of-memory 500 ends the iteration. */
static int parse(const mr__proto_call *pc, const char *body, mr__serve_job *j)
{
    memset(j, 0, sizeof(*j));
    mr_buf_init(&j->body);
    uint64_t before = mr_alloc_failures_here();
    int st = mr__proto_parse(pc, body, strlen(body), &j->req, &j->body);
    if (st == 500) mr_test_accept_if_oom(before);
    assert_ok(j->body.failed); /* an error body cut short: out of memory (under torture, the end) */
    return st;
}

static void score(mr__serve_job **jobs, size_t n, const mr_bundle *b)
{
    size_t rows = 0;
    uint64_t before = mr_alloc_failures_here();
    mr__serve_score(jobs, n, b, "v1", 1, &rows);
    for (size_t i = 0; i < n; i++)
        if (jobs[i]->status == 500 || jobs[i]->body.failed) mr_test_accept_if_oom(before);
}

static void job_clear(mr__serve_job *j)
{
    mr__serve_req_clear(&j->req);
    mr_buf_free(&j->body);
}

/* The text of the first JSON array after `key` in s, brackets included (the
 * numbers exactly as printed). */
static char *array_after(const char *s, const char *key)
{
    const char *p = strstr(s, key);
    assert_non_null(p);
    p = strchr(p, '[');
    assert_non_null(p);
    int depth = 0;
    const char *e = p;
    for (; *e; e++) {
        depth += *e == '[';
        depth -= *e == ']';
        if (!depth) break;
    }
    char *out = mr_strndup(p, (size_t)(e - p + 1));
    assert_alloc(out);
    return out;
}

/* /v1/predict's predictions for a native body, as printed. */
static char *native(const mr_bundle *b, const char *body)
{
    mr__serve_job j;
    memset(&j, 0, sizeof(j));
    mr_buf_init(&j.body);
    uint64_t before = mr_alloc_failures_here();
    int st = mr__serve_parse_body(body, strlen(body), 64, &j.req, &j.body);
    if (st == 500) mr_test_accept_if_oom(before);
    assert_int_equal(st, 0);
    mr__serve_job *one[1] = {&j};
    score(one, 1, b);
    if (j.status != 200) fail_msg("native %d: %s", j.status, j.body.data);
    char *p = array_after(j.body.data, "\"predictions\"");
    job_clear(&j);
    return p;
}

/* Checks err is protocol p's error shape: MLflow {"error_code": code, "message": ... needle ...}, OIP {"error"}. */
static void error_shape(const mr_buf *err, mr__proto p, const char *code, const char *needle)
{
    json_t *e = load(err->data, err->len);
    const char *msg = json_string_value(json_object_get(e, p == MR__PROTO_MLFLOW ? "message" : "error"));
    if (!msg || json_object_size(e) != (p == MR__PROTO_MLFLOW ? 2u : 1u)) fail_msg("error shape: %s", err->data);
    if (p == MR__PROTO_MLFLOW) assert_string_equal(json_string_value(json_object_get(e, "error_code")), code);
    if (!strstr(msg, needle)) fail_msg("'%s' not in the error: %s", needle, msg);
    unload(e);
}

/* ---- paths, methods, headers ---------------------------------------------------------- */

static void test_route(void **state)
{
    (void)state;
    mr__proto_target t;
    static const struct {
        const char *url;
        mr__serve_endpoint ep;
        const char *model, *version;
    } cases[] = {
        {"/invocations", MR__EP_INVOCATIONS, NULL, NULL},
        {"/ping", MR__EP_PING, NULL, NULL},
        {"/health", MR__EP_PING, NULL, NULL},
        {"/version", MR__EP_VERSION, NULL, NULL},
        {"/v2", MR__EP_V2_SERVER, NULL, NULL},
        {"/v2/health/live", MR__EP_V2_LIVE, NULL, NULL},
        {"/v2/health/ready", MR__EP_V2_READY, NULL, NULL},
        {"/v2/models/churn", MR__EP_V2_MODEL, "churn", NULL},
        {"/v2/models/churn/ready", MR__EP_V2_MODEL_READY, "churn", NULL},
        {"/v2/models/churn/infer", MR__EP_V2_INFER, "churn", NULL},
        {"/v2/models/churn/versions/abc", MR__EP_V2_MODEL, "churn", "abc"},
        {"/v2/models/churn/versions/abc/ready", MR__EP_V2_MODEL_READY, "churn", "abc"},
        {"/v2/models/churn/versions/abc/infer", MR__EP_V2_INFER, "churn", "abc"},
        {"/v2/models/", MR__EP_NONE, NULL, NULL},
        {"/v2/models//infer", MR__EP_NONE, NULL, NULL},
        {"/v2/models/churn/versions/", MR__EP_NONE, NULL, NULL},
        {"/v2/models/churn/versions//infer", MR__EP_NONE, NULL, NULL},
        {"/v2/models/churn/explain", MR__EP_NONE, NULL, NULL},
        {"/v2/models/churn/infer/", MR__EP_NONE, NULL, NULL},
        {"/v2/", MR__EP_NONE, NULL, NULL},
        {"/invocations/", MR__EP_NONE, NULL, NULL},
        {"/INVOCATIONS", MR__EP_NONE, NULL, NULL},
        {"", MR__EP_NONE, NULL, NULL},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mr__serve_endpoint ep = mr__proto_route(cases[i].url, &t);
        if (ep != cases[i].ep) fail_msg("%s: endpoint %d, expected %d", cases[i].url, (int)ep, (int)cases[i].ep);
        if (ep == MR__EP_NONE) continue;
        if (cases[i].model) {
            assert_int_equal(t.model_len, strlen(cases[i].model));
            assert_memory_equal(t.model, cases[i].model, t.model_len);
        } else {
            assert_null(t.model);
        }
        if (cases[i].version) {
            assert_int_equal(t.version_len, strlen(cases[i].version));
            assert_memory_equal(t.version, cases[i].version, t.version_len);
        } else {
            assert_null(t.version);
        }
    }
    assert_int_equal(mr__proto_of(MR__EP_INVOCATIONS), MR__PROTO_MLFLOW);
    assert_int_equal(mr__proto_of(MR__EP_VERSION), MR__PROTO_MLFLOW);
    assert_int_equal(mr__proto_of(MR__EP_V2_INFER), MR__PROTO_OIP);
    assert_int_equal(mr__proto_of(MR__EP_V2_LIVE), MR__PROTO_OIP);
    assert_int_equal(mr__proto_of(MR__EP_PREDICT), MR__PROTO_NATIVE);
    assert_int_equal(mr__proto_of(MR__EP_NONE), MR__PROTO_NATIVE);
    assert_true(mr__serve_endpoint_has_body(MR__EP_INVOCATIONS) && mr__serve_endpoint_has_body(MR__EP_V2_INFER) &&
                mr__serve_endpoint_has_body(MR__EP_PREDICT) && !mr__serve_endpoint_has_body(MR__EP_V2_MODEL));
    assert_string_equal(mr__serve_endpoint_label(MR__EP_V2_INFER), "/v2/models/{model}/infer");
    assert_string_equal(mr__serve_endpoint_label(MR__EP_NONE), "other");
    static const mr__serve_endpoint labelled[] = {MR__EP_HEALTHZ, MR__EP_READYZ, MR__EP_METRICS, MR__EP_MODEL,
                                                  MR__EP_PREDICT, MR__EP_INVOCATIONS, MR__EP_PING, MR__EP_VERSION,
                                                  MR__EP_V2_LIVE, MR__EP_V2_READY, MR__EP_V2_SERVER, MR__EP_V2_MODEL,
                                                  MR__EP_V2_MODEL_READY, MR__EP_V2_INFER};
    for (size_t e = 0; e < sizeof(labelled) / sizeof(labelled[0]); e++)
        assert_string_not_equal(mr__serve_endpoint_label(labelled[e]), "other");

    mr__proto_target m = {"e2e", 3, NULL, 0}, mv = {"e2e", 3, "abc", 3}, other = {"e2", 2, NULL, 0};
    assert_true(mr__proto_target_matches(&m, "e2e", "abc"));
    assert_true(mr__proto_target_matches(&mv, "e2e", "abc"));
    assert_false(mr__proto_target_matches(&mv, "e2e", "abcd"));
    assert_false(mr__proto_target_matches(&other, "e2e", "abc"));
}

static void test_content_type(void **state)
{
    (void)state;
    static const struct {
        const char *ct;
        int status, csv;
    } cases[] = {
        {NULL, 0, 0},
        {"application/json", 0, 0},
        {"Application/JSON", 0, 0},
        {"application/json; charset=utf-8", 0, 0},
        {"application/json;charset=\"UTF-8\"", 0, 0},
        {"text/csv", 0, 1},
        {" text/csv ; charset=utf-8 ", 0, 1},
        {"text/plain", 415, 0},
        {"application/x-www-form-urlencoded", 415, 0},
        {"application/json; charset=latin-1", 415, 0},
        {"text/csv; format=pandas-split", 415, 0},
        {"application/json; charset", 415, 0},
        {"", 415, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int csv = -1;
        const char *msg = NULL;
        int st = mr__proto_content_type(cases[i].ct, &csv, &msg);
        if (st != cases[i].status) fail_msg("'%s': %d, expected %d", cases[i].ct ? cases[i].ct : "(none)", st, cases[i].status);
        if (st) assert_non_null(msg);
        else assert_int_equal(csv, cases[i].csv);
    }
}

static void head_verdict(const char *method, const char *url, const char *ct, const char *length, const char *token,
                         mr__serve_verdict *v)
{
    mr__serve_head h;
    mr__serve_head_init(&h);
    if (ct) mr__serve_head_add(&h, "Content-Type", ct);
    if (length) mr__serve_head_add(&h, "Content-Length", length);
    mr__serve_check_head(&h, method, url, token, 1000, v);
}

static void test_check_head(void **state)
{
    (void)state;
    mr__serve_verdict v;
    head_verdict("POST", "/invocations", "text/csv", "10", NULL, &v);
    assert_int_equal(v.status, 0);
    assert_int_equal(v.ep, MR__EP_INVOCATIONS);
    assert_int_equal(v.csv, 1);
    assert_int_equal(v.body_len, 10);
    head_verdict("POST", "/invocations", "text/html", "10", NULL, &v);
    assert_int_equal(v.status, 415);
    head_verdict("POST", "/invocations", NULL, "5000", NULL, &v);
    assert_int_equal(v.status, 413);
    head_verdict("GET", "/invocations", NULL, NULL, NULL, &v);
    assert_int_equal(v.status, 405);
    head_verdict("POST", "/v2/models/m/versions/7/infer", "text/plain", "10", NULL, &v); /* OIP: any Content-Type */
    assert_int_equal(v.status, 0);
    assert_int_equal(v.ep, MR__EP_V2_INFER);
    assert_int_equal(v.target.model_len, 1);
    assert_int_equal(v.target.version_len, 1);
    head_verdict("POST", "/v2/models/m/infer", NULL, "5000", NULL, &v);
    assert_int_equal(v.status, 413);
    head_verdict("PUT", "/v2/models/m/infer", NULL, NULL, NULL, &v);
    assert_int_equal(v.status, 405);
    static const char *gets[] = {"/ping", "/health", "/version", "/v2", "/v2/health/live", "/v2/health/ready",
                                 "/v2/models/m", "/v2/models/m/ready"};
    for (size_t i = 0; i < sizeof(gets) / sizeof(gets[0]); i++) {
        head_verdict("GET", gets[i], NULL, NULL, NULL, &v);
        assert_int_equal(v.status, 0);
        head_verdict("HEAD", gets[i], NULL, NULL, NULL, &v);
        assert_int_equal(v.status, 0);
        head_verdict("POST", gets[i], NULL, "2", NULL, &v);
        assert_int_equal(v.status, 405);
        head_verdict("GET", gets[i], NULL, NULL, "tok", &v); /* only /healthz goes without the token */
        assert_int_equal(v.status, 401);
    }
    head_verdict("GET", "/v2/models/m/explain", NULL, NULL, NULL, &v);
    assert_int_equal(v.status, 404);
}

/* ---- MLflow -------------------------------------------------------------------------- */

/* The rows of every form below, as /v1/predict takes them. */
static const char native_rows[] =
    "{\"rows\": [{\"x1\": 0.25, \"x2\": -1.5, \"plan\": \"pro\", \"n\": 3},"
    " {\"x1\": null, \"x2\": 0.75, \"plan\": \"basic, or not\", \"n\": 0},"
    " {\"x1\": -1.125, \"x2\": 1e-3, \"plan\": \"max\", \"n\": 19}]}";

static const char *const mlflow_bodies[] = {
    "{\"dataframe_split\": {\"columns\": [\"x1\", \"x2\", \"plan\", \"n\"], \"data\": [[0.25, -1.5, \"pro\", 3], "
    "[null, 0.75, \"basic, or not\", 0], [-1.125, 0.001, \"max\", 19]]}}",
    "{\"dataframe_split\": {\"index\": [7, 8, 9], \"columns\": [\"n\", \"plan\", \"extra\", \"x2\", \"x1\"], \"data\": "
    "[[3, \"pro\", 1, -1.5, 0.25], [0, \"basic, or not\", 2, 0.75, null], [19, \"max\", 3, 1e-3, -1.125]]}}",
    "{\"dataframe_split\": {\"data\": [[0.25, -1.5, \"pro\", 3], [null, 0.75, \"basic, or not\", 0], "
    "[-1.125, 0.001, \"max\", 19]]}}",
    "{\"dataframe_records\": [{\"x1\": 0.25, \"x2\": -1.5, \"plan\": \"pro\", \"n\": 3}, "
    "{\"x2\": 0.75, \"plan\": \"basic, or not\", \"n\": 0}, {\"x1\": -1.125, \"x2\": 0.001, \"plan\": \"max\", \"n\": 19}]}",
    "{\"instances\": [{\"x1\": 0.25, \"x2\": -1.5, \"plan\": \"pro\", \"n\": 3}, "
    "{\"x1\": null, \"x2\": 0.75, \"plan\": \"basic, or not\", \"n\": 0}, {\"x1\": -1.125, \"x2\": 0.001, \"plan\": \"max\", "
    "\"n\": 19}]}",
    "{\"instances\": [[0.25, -1.5, \"pro\", 3], [null, 0.75, \"basic, or not\", 0], [-1.125, 0.001, \"max\", 19]]}",
    "{\"inputs\": {\"x1\": [0.25, null, -1.125], \"x2\": [-1.5, 0.75, 0.001], \"plan\": [\"pro\", \"basic, or not\", "
    "\"max\"], \"n\": [3, 0, 19]}, \"params\": {\"k\": 1}}",
    "{\"inputs\": [[0.25, -1.5, \"pro\", 3], [null, 0.75, \"basic, or not\", 0], [-1.125, 0.001, \"max\", 19]]}",
    "{\"inputs\": [{\"x1\": 0.25, \"x2\": -1.5, \"plan\": \"pro\", \"n\": 3}, {\"x2\": 0.75, \"plan\": \"basic, or not\", "
    "\"n\": 0}, {\"x1\": -1.125, \"x2\": 0.001, \"plan\": \"max\", \"n\": 19}]}",
};

/* The same rows as CSV: quoting, a CRLF, a null token, extra columns, a BOM, columns in another order. */
static const char *const mlflow_csvs[] = {
    "x1,x2,plan,n\n0.25,-1.5,pro,3\n,0.75,\"basic, or not\",0\n-1.125,0.001,max,19\n",
    "\xEF\xBB\xBF" "id,n,plan,x2,x1\r\n1,3,pro,-1.5,0.25\r\n2,0,\"basic, or not\",0.75,NA\r\n3,19,\"max\",1e-3,-1.125",
};

static void test_mlflow_forms_score_as_v1(void **state)
{
    fixture *f = *state;
    char *want = native(f->mixed, native_rows);
    size_t n_json = sizeof(mlflow_bodies) / sizeof(mlflow_bodies[0]), n_csv = sizeof(mlflow_csvs) / sizeof(mlflow_csvs[0]);
    for (size_t i = 0; i < n_json + n_csv; i++) {
        int csv = i >= n_json;
        mr__proto_call pc = call(f->mixed, MR__EP_INVOCATIONS, csv);
        mr__serve_job j;
        int st = parse(&pc, csv ? mlflow_csvs[i - n_json] : mlflow_bodies[i], &j);
        if (st) fail_msg("form %zu: %d %s", i, st, j.body.data);
        assert_int_equal(j.req.n_rows, 3);
        assert_int_equal(j.req.proto, MR__PROTO_MLFLOW);
        assert_int_equal(j.req.text, csv);
        /* alone, then in one batch behind a /v1/predict job */
        mr__serve_job *one[1] = {&j};
        score(one, 1, f->mixed);
        if (j.status != 200) fail_msg("form %zu scored %d: %s", i, j.status, j.body.data);
        json_t *doc = load(j.body.data, j.body.len);
        assert_int_equal(json_object_size(doc), 1);
        assert_int_equal(json_array_size(json_object_get(doc, "predictions")), 3);
        unload(doc);
        char *got = array_after(j.body.data, "\"predictions\"");
        if (strcmp(got, want)) fail_msg("form %zu: %s, /v1/predict %s", i, got, want);
        mr__serve_job nat;
        memset(&nat, 0, sizeof(nat));
        mr_buf_init(&nat.body);
        uint64_t before = mr_alloc_failures_here();
        if (mr__serve_parse_body(native_rows, strlen(native_rows), 64, &nat.req, &nat.body) == 500)
            mr_test_accept_if_oom(before);
        mr__serve_job *two[2] = {&nat, &j};
        score(two, 2, f->mixed);
        assert_int_equal(j.status, 200);
        char *again = array_after(j.body.data, "\"predictions\"");
        assert_string_equal(again, want);
        mr_free(again);
        mr_free(got);
        job_clear(&nat);
        job_clear(&j);
    }
    mr_free(want);
}

static void test_mlflow_multiclass_and_single_input(void **state)
{
    fixture *f = *state;
    char *want = native(f->multi, "{\"rows\": [{\"a\": -1.5, \"b\": 0.5}, {\"a\": 1.5, \"b\": null}]}");
    assert_non_null(strstr(want, "[["));
    mr__proto_call pc = call(f->multi, MR__EP_INVOCATIONS, 0);
    mr__serve_job j;
    assert_int_equal(parse(&pc, "{\"instances\": [[-1.5, 0.5], [1.5, null]]}", &j), 0);
    mr__serve_job *one[1] = {&j};
    score(one, 1, f->multi);
    assert_int_equal(j.status, 200);
    char *got = array_after(j.body.data, "\"predictions\"");
    assert_string_equal(got, want); /* one list of class probabilities per row, as /v1/predict */
    mr_free(got);
    mr_free(want);
    job_clear(&j);
    /* a list of single values is a one-input model's rows; this one has two */
    assert_int_equal(parse(&pc, "{\"inputs\": [1, 2]}", &j), 400);
    error_shape(&j.body, MR__PROTO_MLFLOW, "BAD_REQUEST", "one input");
    job_clear(&j);
    /* columns of single values: one row */
    assert_int_equal(parse(&pc, "{\"inputs\": {\"a\": 0.5, \"b\": -0.5}}", &j), 0);
    assert_int_equal(j.req.n_rows, 1);
    job_clear(&j);
    assert_int_equal(parse(&pc, "{\"instances\": []}", &j), 0);
    assert_int_equal(j.req.n_rows, 0);
    score(one, 1, f->multi);
    assert_int_equal(j.status, 200);
    assert_string_equal(j.body.data, "{\"predictions\": []}");
    job_clear(&j);
}

static void test_mlflow_errors(void **state)
{
    fixture *f = *state;
    static const struct {
        int csv;
        const char *body;
        int status;
        const char *code, *needle;
    } cases[] = {
        {0, "", 400, "BAD_REQUEST", "malformed JSON"},
        {0, "{\"instances\": [1,", 400, "BAD_REQUEST", "malformed JSON at line 1"},
        {0, "[1, 2]", 400, "BAD_REQUEST", "got a list"},
        {0, "{\"rows\": []}", 400, "BAD_REQUEST", "none of them"},
        {0, "{\"instances\": [], \"inputs\": []}", 400, "BAD_REQUEST", "several"},
        {0, "{\"dataframe_split\": []}", 400, "BAD_REQUEST", "must be an object"},
        {0, "{\"dataframe_split\": {\"columns\": [\"x1\"]}}", 400, "BAD_REQUEST", "needs \"data\""},
        {0, "{\"dataframe_split\": {\"data\": [], \"dtypes\": {}}}", 400, "BAD_REQUEST", "\"dtypes\""},
        {0, "{\"dataframe_split\": {\"columns\": \"x1\", \"data\": []}}", 400, "BAD_REQUEST", "list of names"},
        {0, "{\"dataframe_split\": {\"columns\": [\"x1\", 2], \"data\": []}}", 400, "BAD_REQUEST", "not a name"},
        {0, "{\"dataframe_split\": {\"columns\": [\"x1\", \"x1\"], \"data\": []}}", 400, "BAD_REQUEST", "named twice"},
        {0, "{\"dataframe_split\": {\"columns\": [\"x1\"], \"data\": [[1, 2]]}}", 400, "BAD_REQUEST", "row 0"},
        {0, "{\"dataframe_split\": {\"columns\": [\"x1\"], \"data\": [1]}}", 400, "BAD_REQUEST", "row 0"},
        {0, "{\"dataframe_split\": {\"columns\": [\"x1\"], \"data\": [[1]], \"index\": []}}", 400, "BAD_REQUEST", "index"},
        {0, "{\"dataframe_split\": {\"data\": [[1, 2, \"pro\"]]}}", 400, "BAD_REQUEST", "in this order: x1, x2, plan, n"},
        {0, "{\"dataframe_records\": {\"x1\": 1}}", 400, "BAD_REQUEST", "list of records"},
        {0, "{\"dataframe_records\": [{\"x1\": 1}, 2]}", 400, "BAD_REQUEST", "item 1"},
        {0, "{\"dataframe_records\": [{\"x1\": 1, \"x2\": 1, \"n\": 1}]}", 400, "INVALID_PARAMETER_VALUE",
         "'plan' is missing from every record"},
        {0, "{\"instances\": \"x\"}", 400, "BAD_REQUEST", "must be a list"},
        {0, "{\"instances\": [[1, 2, \"pro\", 3], {\"x1\": 1}]}", 400, "BAD_REQUEST", "row 1"},
        {0, "{\"instances\": [[1, 2, \"pro\"]]}", 400, "BAD_REQUEST", "has 3 values; the model takes 4"},
        {0, "{\"inputs\": {\"x1\": [1, 2], \"x2\": [3]}}", 400, "BAD_REQUEST", "same length"},
        {0, "{\"inputs\": {\"x1\": [1], \"x2\": 3}}", 400, "BAD_REQUEST", "every column"},
        {0, "{\"inputs\": [1, 2]}", 400, "BAD_REQUEST", "one input"},
        {0, "{\"instances\": [[1, 2, \"pro\", 3], [1, 2, \"pro\", 3], [1, 2, \"pro\", 3], [1, 2, \"pro\", 3], [1, 2, "
            "\"pro\", 3], [1, 2, \"pro\", 3], [1, 2, \"pro\", 3], [1, 2, \"pro\", 3], [1, 2, \"pro\", 3]]}",
         413, "REQUEST_LIMIT_EXCEEDED", "too many rows"},
        {1, "", 400, "BAD_REQUEST", "expected a header line"},
        {1, "x1,x2,plan,n\n1,2,pro\n", 400, "BAD_REQUEST", "CSV body, line 2"},
        {1, "x1,x2,plan,n\n1,2,\"pro,3\n", 400, "BAD_REQUEST", "CSV body"},
        {1, "x1,x1\n1,2\n", 400, "BAD_REQUEST", "duplicate column name"},
        {1, "x1,x2,plan,n\n1,2,p,3\n1,2,p,3\n1,2,p,3\n1,2,p,3\n1,2,p,3\n1,2,p,3\n1,2,p,3\n1,2,p,3\n1,2,p,3\n", 413,
         "REQUEST_LIMIT_EXCEEDED", "too many rows"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mr__proto_call pc = call(f->mixed, MR__EP_INVOCATIONS, cases[i].csv);
        pc.max_rows = 8;
        mr__serve_job j;
        int st = parse(&pc, cases[i].body, &j);
        if (st != cases[i].status) fail_msg("case %zu (%s): %d %s", i, cases[i].body, st, j.body.data);
        assert_null(j.req.doc);
        error_shape(&j.body, MR__PROTO_MLFLOW, cases[i].code, cases[i].needle);
        job_clear(&j);
    }
    /* values that do not fit are found when scored: INVALID_PARAMETER_VALUE, a 400 */
    static const char *const bad[] = {
        "{\"instances\": [{\"x1\": \"a\", \"x2\": 1, \"plan\": \"pro\", \"n\": 1}]}",
        "{\"dataframe_split\": {\"columns\": [\"x1\", \"plan\", \"n\"], \"data\": [[1, \"pro\", 1]]}}",
        "{\"instances\": [{\"x1\": 1, \"plan\": \"pro\", \"n\": 1}]}", /* instances gathers one value per record */
    };
    static const char *const needles[] = {"expected a number, got \"a\"", "'x2' is missing", "'x2' is missing"};
    for (size_t i = 0; i < 3; i++) {
        mr__proto_call pc = call(f->mixed, MR__EP_INVOCATIONS, 0);
        mr__serve_job j;
        assert_int_equal(parse(&pc, bad[i], &j), 0);
        mr__serve_job *one[1] = {&j};
        score(one, 1, f->mixed);
        assert_int_equal(j.status, 400);
        error_shape(&j.body, MR__PROTO_MLFLOW, "INVALID_PARAMETER_VALUE", needles[i]);
        job_clear(&j);
    }
    /* CSV text is parsed by the bundle's rules, as `millrace predict` parses a file */
    mr__proto_call pc = call(f->mixed, MR__EP_INVOCATIONS, 1);
    mr__serve_job j;
    assert_int_equal(parse(&pc, "x1,x2,plan,n\n1,oops,pro,3\n", &j), 0);
    mr__serve_job *one[1] = {&j};
    score(one, 1, f->mixed);
    assert_int_equal(j.status, 400);
    error_shape(&j.body, MR__PROTO_MLFLOW, "INVALID_PARAMETER_VALUE", "row 0: column 'x2': expected a number, got \"oops\"");
    job_clear(&j);
}

/* ---- Open Inference Protocol ------------------------------------------------------------- */

static const char *const oip_bodies[] = {
    "{\"id\": \"r1\", \"inputs\": ["
    "{\"name\": \"x1\", \"shape\": [3], \"datatype\": \"FP64\", \"data\": [0.25, null, -1.125]},"
    "{\"name\": \"x2\", \"shape\": [3], \"datatype\": \"FP32\", \"data\": [-1.5, 0.75, 0.001]},"
    "{\"name\": \"plan\", \"shape\": [3], \"datatype\": \"BYTES\", \"data\": [\"pro\", \"basic, or not\", \"max\"]},"
    "{\"name\": \"n\", \"shape\": [3], \"datatype\": \"INT8\", \"data\": [3, 0, 19]}]}",
    "{\"inputs\": ["
    "{\"name\": \"n\", \"shape\": [3, 1], \"datatype\": \"UINT64\", \"data\": [[3], [0], [19]]},"
    "{\"name\": \"plan\", \"shape\": [3, 1], \"datatype\": \"BYTES\", \"data\": [\"pro\", \"basic, or not\", \"max\"]},"
    "{\"name\": \"x2\", \"shape\": [3, 1], \"datatype\": \"FP64\", \"data\": [[-1.5], [0.75], [1e-3]], \"parameters\": {}},"
    "{\"name\": \"x1\", \"shape\": [3], \"datatype\": \"FP16\", \"data\": [0.25, null, -1.125]}],"
    " \"parameters\": {\"content_type\": \"np\"}, \"outputs\": [{\"name\": \"prediction\"}]}",
};

static void test_oip_forms_score_as_v1(void **state)
{
    fixture *f = *state;
    char *want = native(f->mixed, native_rows);
    for (size_t i = 0; i < sizeof(oip_bodies) / sizeof(oip_bodies[0]); i++) {
        mr__proto_call pc = call(f->mixed, MR__EP_V2_INFER, 0);
        mr__serve_job j;
        int st = parse(&pc, oip_bodies[i], &j);
        if (st) fail_msg("form %zu: %d %s", i, st, j.body.data);
        assert_int_equal(j.req.n_rows, 3);
        mr__serve_job *one[1] = {&j};
        score(one, 1, f->mixed);
        assert_int_equal(j.status, 200);
        json_t *doc = load(j.body.data, j.body.len);
        assert_string_equal(json_string_value(json_object_get(doc, "model_name")), "proto");
        assert_string_equal(json_string_value(json_object_get(doc, "model_version")), "v1");
        if (i == 0) assert_string_equal(json_string_value(json_object_get(doc, "id")), "r1");
        else assert_null(json_object_get(doc, "id"));
        json_t *outs = json_object_get(doc, "outputs"), *o = json_array_get(outs, 0);
        assert_int_equal(json_array_size(outs), 1);
        assert_string_equal(json_string_value(json_object_get(o, "name")), "prediction");
        assert_string_equal(json_string_value(json_object_get(o, "datatype")), "FP64");
        assert_int_equal(json_integer_value(json_array_get(json_object_get(o, "shape"), 0)), 3);
        unload(doc);
        char *got = array_after(j.body.data, "\"data\"");
        if (strcmp(got, want)) fail_msg("form %zu: %s, /v1/predict %s", i, got, want);
        mr_free(got);
        job_clear(&j);
    }
    mr_free(want);
}

static void test_oip_matrix_multiclass_and_id(void **state)
{
    fixture *f = *state;
    static const char rows[] = "{\"rows\": [{\"a\": 0.5, \"b\": -0.25}, {\"a\": null, \"b\": 1.75}]}";
    char *want = native(f->num, rows);
    static const char *const bodies[] = {
        "{\"inputs\": [{\"name\": \"input\", \"shape\": [2, 2], \"datatype\": \"FP64\", \"data\": [0.5, -0.25, null, 1.75]}]}",
        "{\"inputs\": [{\"name\": \"m\", \"shape\": [2, 2], \"datatype\": \"FP32\", \"data\": [[0.5, -0.25], [null, 1.75]]}]}",
    };
    for (size_t i = 0; i < 2; i++) {
        mr__proto_call pc = call(f->num, MR__EP_V2_INFER, 0);
        mr__serve_job j;
        assert_int_equal(parse(&pc, bodies[i], &j), 0);
        mr__serve_job *one[1] = {&j};
        score(one, 1, f->num);
        assert_int_equal(j.status, 200);
        char *got = array_after(j.body.data, "\"data\"");
        assert_string_equal(got, want);
        mr_free(got);
        job_clear(&j);
    }
    mr_free(want);
    /* multiclass: one FP64 [N] output per class, the ones asked for in their order; an id with escapes */
    mr__proto_call pc = call(f->multi, MR__EP_V2_INFER, 0);
    pc.model_name = "model";
    mr__serve_job j;
    assert_int_equal(parse(&pc, "{\"id\": \"a\\\"\\u00e9\\n\", \"inputs\": [{\"name\": \"in\", \"shape\": [1, 2], \"datatype\": "
                                "\"FP64\", \"data\": [1, 2]}], \"outputs\": [{\"name\": \"prediction_2\"}, "
                                "{\"name\": \"prediction_0\"}]}",
                           &j),
                     0);
    mr__serve_job *one[1] = {&j};
    score(one, 1, f->multi);
    assert_int_equal(j.status, 200);
    json_t *doc = load(j.body.data, j.body.len);
    json_t *id = json_object_get(doc, "id"), *outs = json_object_get(doc, "outputs");
    assert_string_equal(json_string_value(id), "a\"\xC3\xA9\n");
    assert_int_equal(json_array_size(outs), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(outs, 0), "name")), "prediction_2");
    assert_string_equal(json_string_value(json_object_get(json_array_get(outs, 1), "name")), "prediction_0");
    double p2 = json_number_value(json_array_get(json_object_get(json_array_get(outs, 0), "data"), 0));
    double p0 = json_number_value(json_array_get(json_object_get(json_array_get(outs, 1), "data"), 0));
    unload(doc);
    job_clear(&j);
    char *all = native(f->multi, "{\"rows\": [{\"a\": 1, \"b\": 2}]}");
    json_t *ps = load(all, strlen(all));
    assert_true(json_number_value(json_array_get(json_array_get(ps, 0), 2)) == p2);
    assert_true(json_number_value(json_array_get(json_array_get(ps, 0), 0)) == p0);
    unload(ps);
    mr_free(all);
}

static void test_oip_errors(void **state)
{
    fixture *f = *state;
#define COL(name, dt, shape, data) "{\"name\": \"" name "\", \"datatype\": \"" dt "\", \"shape\": " shape ", \"data\": " data "}"
#define REST "," COL("x2", "FP64", "[1]", "[1]") "," COL("plan", "BYTES", "[1]", "[\"pro\"]") "," COL("n", "INT64", "[1]", "[1]")
    static const struct {
        const char *body;
        int status;
        const char *needle;
    } cases[] = {
        {"{\"inputs\": [", 400, "malformed JSON"},
        {"[]", 400, "JSON object"},
        {"{}", 400, "\"inputs\""},
        {"{\"inputs\": {}}", 400, "\"inputs\""},
        {"{\"inputs\": []}", 400, "\"inputs\""},
        {"{\"id\": 1, \"inputs\": [" COL("x1", "FP64", "[1]", "[1]") REST "]}", 400, "\"id\""},
        {"{\"parameters\": 1, \"inputs\": [" COL("x1", "FP64", "[1]", "[1]") REST "]}", 400, "\"parameters\""},
        {"{\"inputs\": [1]}", 400, "inputs[0] must be an object"},
        {"{\"inputs\": [{\"shape\": [1], \"datatype\": \"FP64\", \"data\": [1]}]}", 400, "\"name\""},
        {"{\"inputs\": [{\"name\": \"x1\", \"shape\": [1], \"data\": [1]}]}", 400, "\"datatype\""},
        {"{\"inputs\": [{\"name\": \"x1\", \"datatype\": \"FP64\", \"data\": [1]}]}", 400, "\"shape\""},
        {"{\"inputs\": [{\"name\": \"x1\", \"datatype\": \"FP64\", \"shape\": [1]}]}", 400, "\"data\""},
        {"{\"inputs\": [" COL("x1", "FP65", "[1]", "[1]") REST "]}", 400, "unknown datatype 'FP65'"},
        {"{\"inputs\": [" COL("x1", "FP64", "[]", "[1]") REST "]}", 400, "\"shape\" must be"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1, 1, 1]", "[1]") REST "]}", 400, "\"shape\" must be"},
        {"{\"inputs\": [" COL("x1", "FP64", "[-1]", "[1]") REST "]}", 400, "non-negative"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1.5]", "[1]") REST "]}", 400, "non-negative"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "{}") REST "]}", 400, "\"data\" must be a list"},
        {"{\"inputs\": [" COL("x1", "FP64", "[2]", "[1]") REST "]}", 400, "different numbers of rows"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[1, 2]") REST "]}", 400, "2 values where its shape holds 1"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1, 2]", "[1, 2]") REST "]}", 400, "a column is [N] or [N, 1]"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1, 1]", "[[[1]]]") REST "]}", 400, "nested data"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[[1]]") REST "]}", 400, "nested data"},
        {"{\"inputs\": [" COL("x1", "FP64", "[2, 1]", "[[1], 2]") "]}", 400, "mixes lists and values"},
        {"{\"inputs\": [" COL("x1", "FP64", "[2, 1]", "[1, [2]]") "]}", 400, "mixes lists and values"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[\"1\"]") REST "]}", 400, "datatype FP64, but value 0 is a string"},
        {"{\"inputs\": [" COL("x1", "BOOL", "[1]", "[1]") REST "]}", 400, "datatype BOOL, but value 0 is 1"},
        {"{\"inputs\": [" COL("x1", "INT32", "[1]", "[2147483648]") REST "]}", 400, "datatype INT32"},
        {"{\"inputs\": [" COL("x1", "UINT8", "[1]", "[-1]") REST "]}", 400, "datatype UINT8"},
        {"{\"inputs\": [" COL("x1", "BYTES", "[1]", "[3]") REST "]}", 400, "datatype BYTES"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[1]") "," COL("x1", "FP64", "[1]", "[1]") "]}", 400, "given twice"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[1]") "," COL("x7", "FP64", "[1]", "[1]") "]}", 400,
         "unknown input 'x7': the model's inputs are x1, x2, plan, n"},
        {"{\"inputs\": [" COL("input", "FP64", "[1, 3]", "[1, 2, 3]") "]}", 400, "unknown input 'input'"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[1]") REST "], \"outputs\": {}}", 400, "\"outputs\""},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[1]") REST "], \"outputs\": [{}]}", 400, "outputs[0]"},
        {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[1]") REST "], \"outputs\": [{\"name\": \"p\"}]}", 400,
         "unknown output 'p' (the model's outputs: prediction)"},
        {"{\"inputs\": [" COL("x1", "FP64", "[9]", "[1, 2, 3, 4, 5, 6, 7, 8, 9]") "]}", 413, "too many rows"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mr__proto_call pc = call(f->mixed, MR__EP_V2_INFER, 0);
        pc.max_rows = 8;
        mr__serve_job j;
        int st = parse(&pc, cases[i].body, &j);
        if (st != cases[i].status) fail_msg("case %zu (%s): %d %s", i, cases[i].body, st, j.body.data);
        assert_null(j.req.doc);
        error_shape(&j.body, MR__PROTO_OIP, NULL, cases[i].needle);
        job_clear(&j);
    }
    /* found when scored: a missing input, a value its input does not take (422 -> 400) */
    static const char *const bad[] = {"{\"inputs\": [" COL("x1", "FP64", "[1]", "[1]") "]}",
                                      "{\"inputs\": [" COL("x1", "BYTES", "[1]", "[\"a\"]") REST "]}",
                                      "{\"inputs\": [" COL("x1", "FP64", "[1]", "[1]") "," COL("x2", "FP64", "[1]", "[1]")
                                      "," COL("plan", "INT64", "[1]", "[7]") "," COL("n", "INT64", "[1]", "[1]") "]}"};
    static const char *const needles[] = {"'x2' is missing", "expected a number, got \"a\"", "column 'plan'"};
    for (size_t i = 0; i < 3; i++) {
        mr__proto_call pc = call(f->mixed, MR__EP_V2_INFER, 0);
        mr__serve_job j;
        assert_int_equal(parse(&pc, bad[i], &j), 0);
        mr__serve_job *one[1] = {&j};
        score(one, 1, f->mixed);
        assert_int_equal(j.status, 400);
        error_shape(&j.body, MR__PROTO_OIP, NULL, needles[i]);
        job_clear(&j);
    }
#undef REST
#undef COL
}

/* ---- errors, names, metadata, prices ------------------------------------------------------ */

static void test_error_json(void **state)
{
    (void)state;
    static const struct {
        int status, wire;
        const char *code;
    } cases[] = {{400, 400, "BAD_REQUEST"}, {401, 401, "UNAUTHENTICATED"}, {404, 404, "ENDPOINT_NOT_FOUND"},
                 {405, 405, "BAD_REQUEST"}, {413, 413, "REQUEST_LIMIT_EXCEEDED"}, {415, 415, "BAD_REQUEST"},
                 {422, 400, "INVALID_PARAMETER_VALUE"}, {500, 500, "INTERNAL_ERROR"}, {501, 501, "NOT_IMPLEMENTED"},
                 {503, 503, "TEMPORARILY_UNAVAILABLE"}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mr_buf b;
        mr_buf_init(&b);
        assert_int_equal(mr__proto_error_json(&b, MR__PROTO_MLFLOW, cases[i].status, "bad \"x\" \xff"), cases[i].wire);
        assert_false(b.failed && !mr_test_fault_fired());
        if (!b.failed) error_shape(&b, MR__PROTO_MLFLOW, cases[i].code, "bad \"x\" \xEF\xBF\xBD");
        b.len = 0;
        assert_int_equal(mr__proto_error_json(&b, MR__PROTO_OIP, cases[i].status, "m"), cases[i].wire);
        if (!b.failed) error_shape(&b, MR__PROTO_OIP, NULL, "m");
        b.len = 0;
        assert_int_equal(mr__proto_error_json(&b, MR__PROTO_NATIVE, cases[i].status, "m"), cases[i].status);
        mr_buf_free(&b);
    }
}

static void test_names_and_metadata(void **state)
{
    fixture *f = *state;
    char name[MR__MODEL_NAME_MAX + 1];
    uint64_t before = mr_alloc_failures_here();
    int rc = mr__proto_model_name(f->mixed, name);
    if (rc) mr_test_accept_if_oom(before);
    assert_int_equal(rc, 0);
    assert_string_equal(name, "proto");
    rc = mr__proto_model_name(f->num, name); /* no name */
    if (rc) mr_test_accept_if_oom(before);
    assert_int_equal(rc, 0);
    assert_string_equal(name, "model");
    rc = mr__proto_model_name(f->multi, name); /* a name a path cannot carry as it is */
    if (rc) mr_test_accept_if_oom(before);
    assert_string_equal(name, "model");

    mr_buf b;
    mr_buf_init(&b);
    mr__proto_v2_model_json(&b, f->mixed, "proto", "abc");
    assert_ok(b.failed);
    json_t *m = load(b.data, b.len);
    assert_string_equal(json_string_value(json_object_get(m, "name")), "proto");
    assert_string_equal(json_string_value(json_array_get(json_object_get(m, "versions"), 0)), "abc");
    json_t *ins = json_object_get(m, "inputs");
    static const char *const names[] = {"x1", "x2", "plan", "n"}, *const types[] = {"FP64", "FP64", "BYTES", "FP64"};
    assert_int_equal(json_array_size(ins), 4);
    for (size_t i = 0; i < 4; i++) {
        assert_string_equal(json_string_value(json_object_get(json_array_get(ins, i), "name")), names[i]);
        assert_string_equal(json_string_value(json_object_get(json_array_get(ins, i), "datatype")), types[i]);
        assert_int_equal(json_integer_value(json_array_get(json_object_get(json_array_get(ins, i), "shape"), 0)), -1);
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(json_object_get(m, "outputs"), 0), "name")),
                        "prediction");
    unload(m);
    b.len = 0;
    mr__proto_v2_model_json(&b, f->multi, "model", "v");
    assert_ok(b.failed);
    m = load(b.data, b.len);
    assert_int_equal(json_array_size(json_object_get(m, "outputs")), 3);
    unload(m);
    b.len = 0;
    mr__proto_v2_server_json(&b);
    assert_ok(b.failed);
    m = load(b.data, b.len);
    assert_string_equal(json_string_value(json_object_get(m, "version")), mr_version());
    assert_int_equal(json_array_size(json_object_get(m, "extensions")), 0);
    unload(m);
    b.len = 0;
    mr__proto_v2_ready_json(&b, "proto", 1);
    assert_ok(b.failed);
    assert_string_equal(b.data, "{\"name\": \"proto\", \"ready\": true}");
    b.len = 0;
    mr__proto_v2_ready_json(&b, NULL, 0);
    assert_ok(b.failed);
    assert_string_equal(b.data, "{\"ready\": false}");
    mr_buf_free(&b);
}

static void test_cost(void **state)
{
    fixture *f = *state;
    mr__proto_call pj = call(f->mixed, MR__EP_INVOCATIONS, 0), pcsv = call(f->mixed, MR__EP_INVOCATIONS, 1);
    const char *body = mlflow_bodies[0];
    size_t len = strlen(body);
    /* at least the parse and a column per input; a CSV body at least its text several times over */
    assert_true(mr__proto_cost(&pj, body, len) >= 2 * mr__serve_json_cost(body, len) + 4 * 640);
    assert_true(mr__proto_cost(&pcsv, mlflow_csvs[0], strlen(mlflow_csvs[0])) >= 8 * strlen(mlflow_csvs[0]) + 15 * 176);
    mr__proto_call none = pj;
    none.b = f->num;
    assert_true(mr__proto_cost(&none, "", 0) < mr__proto_cost(&pj, "", 0)); /* fewer, shorter inputs */
}

int main(void)
{
    mr_pool_init(1, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_content_type),
        cmocka_unit_test(test_check_head),
        cmocka_unit_test(test_mlflow_forms_score_as_v1),
        cmocka_unit_test(test_mlflow_multiclass_and_single_input),
        cmocka_unit_test(test_mlflow_errors),
        cmocka_unit_test(test_oip_forms_score_as_v1),
        cmocka_unit_test(test_oip_matrix_multiclass_and_id),
        cmocka_unit_test(test_oip_errors),
        cmocka_unit_test(test_error_json),
        cmocka_unit_test(test_names_and_metadata),
        cmocka_unit_test(test_cost),
    };
    int rc = mr_test_run(tests, setup, teardown);
    mr_pool_shutdown();
    return rc;
}
