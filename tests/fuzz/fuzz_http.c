/* libFuzzer target for the model server's request handling
 * (src/serve/request.c): each input is one raw HTTP/1.1 request — request
 * line, headers, body — split here the way libmicrohttpd hands a request
 * to the server (method; path without the query; headers with leading
 * blanks stripped; a chunked body decoded), then driven through what the
 * server does with it: the header checks with and without a bearer token
 * and, for a POST /v1/predict that passes them, the memory price of the
 * body, its parse and shape check, and scoring against a small bundle
 * built at start-up (alone, and in a batch with a copy of itself); routed
 * by path as the server routes, the same for the protocols' bodies: POST
 * /invocations (MLflow: JSON forms, or text/csv by its Content-Type) and
 * POST /v2/models/fuzz[/versions/fuzz]/infer (Open Inference Protocol),
 * parsed by src/serve/protocol.c. Aborts when a property the server relies
 * on breaks:
 *   - an answer body (error or predictions) that is not valid JSON;
 *   - a status outside what the header checks or the parser may return;
 *   - with a token, a request other than /healthz let through without
 *     "Bearer <token>";
 *   - a request let through whose Content-Length values disagree;
 *   - a memory price below what jansson really allocated for the parse
 *     (as glibc's chunks: usable size + 8, rounded up to 16, at least 32);
 *   - a 200 whose predictions are not one per row, or that differ when
 *     the request is scored together with another one;
 *   - a protocol's error that is not in its shape (MLflow {"error_code",
 *     "message"}, OIP {"error"}), or a 200 that is not its answer (MLflow
 *     {"predictions"}, OIP "outputs" of shape [rows] holding a value per row).
 * Also built with any compiler for the corpus replay (replay.c), which
 * ctest runs on tests/fuzz/corpus/serve. */
#include "millrace/bundle.h"
#include "millrace/features.h"
#include "millrace/model.h"
#include "millrace/spec.h"
#include "serve/serve_int.h"

#include <jansson.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_BODY 65536
#define MAX_ROWS 64
#define MAX_HEADERS 64
#define TOKEN "s3cret"

/* ---- jansson's allocations, priced as glibc's chunks ----------------------- */

static size_t live, peak;

/* What glibc's allocator spends on a block with `usable` bytes: the block
 * plus its 8-byte header, in 16-byte steps, 32 at least. Sizes are read
 * back with malloc_usable_size (no header of ours), because the library
 * may free what jansson returns (json_dumps) with plain free(). */
static size_t price(size_t usable)
{
    size_t c = (usable + 8 + 15) & ~(size_t)15;
    return c < 32 ? 32 : c;
}

static void *count_malloc(size_t n)
{
    void *p = malloc(n);
    if (!p) return NULL;
    live += price(malloc_usable_size(p));
    if (live > peak) peak = live;
    return p;
}

static void count_free(void *p)
{
    if (!p) return;
    size_t c = price(malloc_usable_size(p));
    live = live > c ? live - c : 0;
    free(p);
}

/* ---- the bundle -------------------------------------------------------------- */

static mr_bundle *bundle;
static int verbose; /* MR_FUZZ_VERBOSE=1: print each answer (to see what a corpus reaches) */

static void die(const char *what, const mr_error *err)
{
    fprintf(stderr, "fuzz_http: %s: %s\n", what, err ? err->msg : "");
    abort();
}

/* x1 (float, some null), x2 (float), plan (string, one-hot), n (int64),
 * label y; a few boosting rounds. Deterministic. */
static void make_bundle(void)
{
    mr_error err;
    mr_error_init(&err);
    mr_table *t = NULL;
    mr_column *x1, *x2, *plan, *cnt, *y;
    if (mr_table_new(&t, &err) != MR_OK) die("table", &err);
    mr_column_new("x1", MR_T_FLOAT64, 400, &x1, NULL);
    mr_column_new("x2", MR_T_FLOAT64, 400, &x2, NULL);
    mr_column_new("plan", MR_T_STRING, 400, &plan, NULL);
    mr_column_new("n", MR_T_INT64, 400, &cnt, NULL);
    mr_column_new("y", MR_T_FLOAT64, 400, &y, NULL);
    static const char *plans[] = {"basic", "pro", "max", "free"};
    uint64_t r = 12345;
    for (size_t i = 0; i < 400; i++) {
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        double a = (double)(r >> 40) / (double)(1 << 24) * 4 - 2, b = (double)((r >> 16) & 0xffff) / 65536.0 * 4 - 2;
        int p = (int)(r >> 62);
        if (i % 17 == 0) mr_column_append_null(x1);
        else mr_column_append_float64(x1, a);
        mr_column_append_float64(x2, b);
        mr_column_append_str(plan, plans[p], strlen(plans[p]));
        mr_column_append_int64(cnt, (int64_t)(i % 20));
        mr_column_append_float64(y, a * b + (p == 1) > 0 ? 1.0 : 0.0);
    }
    mr_table_add_column(t, x1, NULL);
    mr_table_add_column(t, x2, NULL);
    mr_table_add_column(t, plan, NULL);
    mr_table_add_column(t, cnt, NULL);
    mr_table_add_column(t, y, NULL);
    static const char steps[] = "- impute: {columns: [x1], strategy: median, indicator: true}\n"
                                "- onehot: {columns: [plan]}\n";
    static const char params[] = "{objective: binary, num_iterations: 10, num_leaves: 7, min_data_in_leaf: 5, learning_rate: 0.3}";
    mr_value *sv = NULL, *pv = NULL;
    mr_features_spec *spec = NULL;
    mr_features *fx = NULL;
    mr_table *xt = NULL;
    mr_model *m = NULL;
    if (mr_yaml_parse(steps, strlen(steps), "steps", &sv, &err) != MR_OK ||
        mr_features_spec_parse(sv, "steps", &spec, &err) != MR_OK ||
        mr_features_fit_apply_train(spec, t, "y", &fx, &xt, &err) != MR_OK)
        die("features", &err);
    mr_column *ycopy = NULL;
    if (mr_column_slice(mr_table_column(t, "y"), 0, t->n_rows, &ycopy, &err) != MR_OK ||
        mr_table_add_column(xt, ycopy, &err) != MR_OK)
        die("label", &err);
    mr_train_opts o;
    mr_train_opts_init(&o);
    o.label = "y";
    o.num_threads = 1;
    if (mr_yaml_parse(params, strlen(params), "params", &pv, &err) != MR_OK) die("params", &err);
    o.params = pv;
    if (mr_model_train(xt, NULL, &o, &m, &err) != MR_OK) die("train", &err);
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = m;
    bb.features = fx;
    bb.name = "fuzz";
    mr_buf bytes;
    mr_buf_init(&bytes);
    if (mr_bundle_write(&bb, &bytes, &err) != MR_OK || mr_bundle_from_bytes(bytes.data, bytes.len, &bundle, &err) != MR_OK)
        die("bundle", &err);
    mr_buf_free(&bytes);
    mr_model_free(m);
    mr_features_free(fx);
    mr_features_spec_free(spec);
    mr_table_free(xt);
    mr_table_free(t);
    mr_value_free(sv);
    mr_value_free(pv);
}

/* ---- splitting a raw request as libmicrohttpd would ------------------------------ */

typedef struct request {
    char *method, *url;
    char *names[MAX_HEADERS], *values[MAX_HEADERS];
    size_t n_headers;
    const uint8_t *rest; /* what follows the blank line ending the head */
    size_t rest_len;
    mr_buf body;         /* the body as the server would see it */
} request;

static char *dup_range(const uint8_t *s, size_t n) { return mr_strndup((const char *)s, n); }

/* Decodes a chunked body leniently: stops at the last chunk or at the
 * first thing that is not a chunk. */
static void dechunk(const uint8_t *p, size_t n, mr_buf *out)
{
    size_t i = 0;
    while (i < n) {
        size_t len = 0, digits = 0;
        while (i < n && digits < 8) {
            int c = p[i], d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
            if (d < 0) break;
            len = len * 16 + (size_t)d;
            digits++;
            i++;
        }
        if (!digits) return;
        while (i < n && p[i] != '\n') i++; /* extensions, CR */
        i++;
        if (len == 0 || i >= n) return;
        if (len > n - i) len = n - i;
        mr_buf_append(out, p + i, len);
        i += len;
        if (i < n && p[i] == '\r') i++;
        if (i < n && p[i] == '\n') i++;
    }
}

static int split(const uint8_t *d, size_t n, request *rq)
{
    memset(rq, 0, sizeof(*rq));
    mr_buf_init(&rq->body);
    size_t head_end = n, body_at = n;
    rq->rest = d + n;
    for (size_t i = 0; i + 1 < n; i++) {
        if (d[i] == '\n' && d[i + 1] == '\n') {
            head_end = i;
            body_at = i + 2;
            break;
        }
        if (i + 3 < n && !memcmp(d + i, "\r\n\r\n", 4)) {
            head_end = i;
            body_at = i + 4;
            break;
        }
    }
    rq->rest = d + body_at;
    rq->rest_len = n - body_at;
    /* request line: METHOD SP TARGET SP VERSION */
    size_t eol = 0;
    while (eol < head_end && d[eol] != '\n') eol++;
    size_t line_end = eol > 0 && d[eol - 1] == '\r' ? eol - 1 : eol;
    const uint8_t *sp1 = memchr(d, ' ', line_end);
    if (!sp1) return -1;
    const uint8_t *tgt = sp1 + 1, *sp2 = memchr(tgt, ' ', (size_t)(d + line_end - tgt));
    size_t tlen = sp2 ? (size_t)(sp2 - tgt) : (size_t)(d + line_end - tgt);
    const uint8_t *q = memchr(tgt, '?', tlen);
    rq->method = dup_range(d, (size_t)(sp1 - d));
    rq->url = dup_range(tgt, q ? (size_t)(q - tgt) : tlen);
    /* header lines */
    size_t i = eol + 1;
    while (i < head_end && rq->n_headers < MAX_HEADERS) {
        size_t e = i;
        while (e < head_end && d[e] != '\n') e++;
        size_t le = e > i && d[e - 1] == '\r' ? e - 1 : e;
        const uint8_t *colon = memchr(d + i, ':', le - i);
        if (colon) {
            const uint8_t *v = colon + 1;
            while (v < d + le && (*v == ' ' || *v == '\t')) v++;
            rq->names[rq->n_headers] = dup_range(d + i, (size_t)(colon - (d + i)));
            rq->values[rq->n_headers] = dup_range(v, (size_t)(d + le - v));
            rq->n_headers++;
        }
        i = e + 1;
    }
    return 0;
}

static void request_free(request *rq)
{
    mr_free(rq->method);
    mr_free(rq->url);
    for (size_t i = 0; i < rq->n_headers; i++) {
        mr_free(rq->names[i]);
        mr_free(rq->values[i]);
    }
    mr_buf_free(&rq->body);
}

/* ---- properties ------------------------------------------------------------------- */

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_http: property broken: %s\n", what);
    abort();
}

static json_t *valid_json(const mr_buf *b, const char *what)
{
    json_error_t je;
    json_t *doc = json_loadb(b->data ? b->data : "", b->len, 0, &je);
    if (!doc) fprintf(stderr, "fuzz_http: %s is not JSON (%s): %.*s\n", what, je.text, (int)b->len, b->data ? b->data : "");
    check(doc != NULL, what);
    return doc;
}

static void check_head(const request *rq, mr__serve_verdict *v_plain)
{
    for (int with_token = 0; with_token < 2; with_token++) {
        mr__serve_head h;
        mr__serve_head_init(&h);
        for (size_t i = 0; i < rq->n_headers; i++) mr__serve_head_add(&h, rq->names[i], rq->values[i]);
        mr__serve_verdict v;
        mr__serve_check_head(&h, rq->method, rq->url, with_token ? TOKEN : NULL, MAX_BODY, &v);
        int st = v.status;
        if (verbose) fprintf(stderr, "fuzz_http: %s %s%s: %d %s\n", rq->method, rq->url, with_token ? " (token)" : "", st, st ? v.msg : "");
        check(st == 0 || st == 400 || st == 401 || st == 404 || st == 405 || st == 413 || st == 415 || st == 501,
              "head status");
        if (st) {
            check(v.msg != NULL, "a refusal has a message");
            mr_buf b;
            mr_buf_init(&b);
            mr__serve_error_json(&b, v.msg, NULL, -1);
            json_decref(valid_json(&b, "a header refusal"));
            mr_buf_free(&b);
        } else {
            check(!(h.n_content_length > 1 && h.content_length_bad), "conflicting Content-Length let through");
            if (with_token && v.ep != MR__EP_HEALTHZ)
                check(h.authorization && !strcmp(h.authorization, "Bearer " TOKEN), "let through without the token");
        }
        if (!with_token) *v_plain = v;
    }
}

/* The predictions array of an answer (borrowed from doc). */
static json_t *predictions(json_t *doc) { return json_object_get(doc, "predictions"); }

static void check_predict(const char *body, size_t len)
{
    size_t cost = mr__serve_json_cost(body, len);
    size_t before = live;
    peak = live;
    mr__serve_job j, j2;
    memset(&j, 0, sizeof(j));
    memset(&j2, 0, sizeof(j2));
    mr_buf_init(&j.body);
    mr_buf_init(&j2.body);
    int st = mr__serve_parse_body(body, len, MAX_ROWS, &j.req, &j.body);
    if (peak - before > cost || verbose)
        fprintf(stderr, "fuzz_http: %zu bytes of body: the parse took %zu bytes, priced %zu\n", len, peak - before, cost);
    check(peak - before <= cost, "the memory price is below the parse's allocations");
    if (st) {
        if (verbose) fprintf(stderr, "fuzz_http: %d %.*s\n", st, (int)j.body.len, j.body.data);
        check(st == 400 || st == 413 || st == 500, "parse status");
        json_decref(valid_json(&j.body, "a parse error"));
        mr_buf_free(&j.body);
        return;
    }
    size_t rows = 0;
    mr__serve_job *one[1] = {&j};
    mr__serve_score(one, 1, bundle, "fuzz", 1, &rows);
    if (verbose) fprintf(stderr, "fuzz_http: %d %.*s\n", j.status, (int)j.body.len, j.body.data);
    check(j.status == 200 || j.status == 422 || j.status == 500, "score status");
    json_t *a = valid_json(&j.body, "an answer");
    if (j.status == 200) {
        check(rows == j.req.n_rows, "rows scored");
        check(json_array_size(predictions(a)) == j.req.n_rows, "one prediction per row");
        /* the same request next to a copy of itself: the same answers */
        j2.req = j.req;
        mr__serve_job *two[2] = {&j2, &j};
        mr__serve_score(two, 2, bundle, "fuzz", 1, &rows);
        check(j.status == 200 && j2.status == 200 && rows == 2 * j.req.n_rows, "batch of two");
        json_t *b = valid_json(&j.body, "a batched answer");
        check(json_equal(predictions(a), predictions(b)), "batching changed the predictions");
        check(j2.body.len == j.body.len && !memcmp(j2.body.data, j.body.data, j.body.len), "two copies, two answers");
        json_decref(b);
    }
    json_decref(a);
    mr__serve_req_clear(&j.req);
    mr_buf_free(&j.body);
    mr_buf_free(&j2.body);
}

/* A protocol's error body: its shape, a message. */
static void check_proto_error(mr__proto p, const mr_buf *b)
{
    json_t *e = valid_json(b, "a protocol's error");
    if (p == MR__PROTO_MLFLOW)
        check(json_object_size(e) == 2 && json_is_string(json_object_get(e, "error_code")) &&
                  json_is_string(json_object_get(e, "message")),
              "MLflow's error shape");
    else
        check(json_object_size(e) == 1 && json_is_string(json_object_get(e, "error")), "OIP's error shape");
    json_decref(e);
}

/* The values of a protocol's 200 (borrowed from doc), checked to be its
 * answer with one value per row. */
static json_t *proto_values(mr__proto p, json_t *doc, size_t rows)
{
    if (p == MR__PROTO_MLFLOW) {
        json_t *v = json_object_get(doc, "predictions");
        check(json_object_size(doc) == 1 && json_array_size(v) == rows, "MLflow: one prediction per row");
        return v;
    }
    json_t *outs = json_object_get(doc, "outputs"), *o;
    size_t i;
    check(json_is_string(json_object_get(doc, "model_name")) && json_array_size(outs) >= 1, "OIP: an answer");
    json_array_foreach(outs, i, o)
    {
        check(json_integer_value(json_array_get(json_object_get(o, "shape"), 0)) == (json_int_t)rows &&
                  json_array_size(json_object_get(o, "data")) == rows,
              "OIP: each output [rows], a value per row");
    }
    return outs;
}

static char model_name[MR__MODEL_NAME_MAX + 1];

static void check_proto(mr__serve_endpoint ep, int csv, const char *body, size_t len)
{
    mr__proto_call pc = {ep, csv, bundle, model_name, MAX_ROWS};
    mr__proto p = mr__proto_of(ep);
    size_t cost = mr__proto_cost(&pc, body, len);
    size_t before = live;
    peak = live;
    mr__serve_job j, j2;
    memset(&j, 0, sizeof(j));
    memset(&j2, 0, sizeof(j2));
    mr_buf_init(&j.body);
    mr_buf_init(&j2.body);
    int st = mr__proto_parse(&pc, body, len, &j.req, &j.body);
    if (peak - before > cost || verbose)
        fprintf(stderr, "fuzz_http: %zu bytes of %s body: the parse took %zu bytes, priced %zu\n", len,
                mr__serve_endpoint_label(ep), peak - before, cost);
    check(peak - before <= cost, "the memory price of a protocol's body is below its parse's allocations");
    if (st) {
        if (verbose) fprintf(stderr, "fuzz_http: %d %.*s\n", st, (int)j.body.len, j.body.data);
        check(st == 400 || st == 413 || st == 415 || st == 500, "protocol parse status");
        check(j.req.doc == NULL && j.req.reply == NULL, "a refused body keeps nothing");
        check_proto_error(p, &j.body);
        mr_buf_free(&j.body);
        return;
    }
    size_t rows = 0;
    mr__serve_job *one[1] = {&j};
    mr__serve_score(one, 1, bundle, "fuzz", 1, &rows);
    if (verbose) fprintf(stderr, "fuzz_http: %d %.*s\n", j.status, (int)j.body.len, j.body.data);
    check(j.status == 200 || j.status == 400 || j.status == 500, "protocol score status");
    if (j.status != 200) {
        check_proto_error(p, &j.body);
    } else {
        json_t *a = valid_json(&j.body, "a protocol's answer");
        check(rows == j.req.n_rows, "protocol rows scored");
        json_t *va = proto_values(p, a, j.req.n_rows);
        j2.req = j.req; /* the same request next to a copy of itself: the same answers */
        mr__serve_job *two[2] = {&j2, &j};
        mr__serve_score(two, 2, bundle, "fuzz", 1, &rows);
        check(j.status == 200 && j2.status == 200 && rows == 2 * j.req.n_rows, "protocol batch of two");
        json_t *b = valid_json(&j.body, "a batched protocol answer");
        check(json_equal(va, proto_values(p, b, j.req.n_rows)), "batching changed a protocol's predictions");
        check(j2.body.len == j.body.len && !memcmp(j2.body.data, j.body.data, j.body.len), "two copies, two answers");
        json_decref(b);
        json_decref(a);
    }
    mr__serve_req_clear(&j.req);
    mr_buf_free(&j.body);
    mr_buf_free(&j2.body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!bundle) {
        json_set_alloc_funcs(count_malloc, count_free); /* before anything parses JSON */
        verbose = getenv("MR_FUZZ_VERBOSE") != NULL;
        mr_pool_init(1, NULL);
        make_bundle();
        if (mr__proto_model_name(bundle, model_name) != 0 || strcmp(model_name, "fuzz")) die("model name", NULL);
    }
    request rq;
    if (split(data, size, &rq) == 0) {
        mr__serve_verdict v = {0};
        check_head(&rq, &v);
        /* as the server routes: a body endpoint, and for /v2 the model this server serves (else a 404) */
        int served = !v.target.model || mr__proto_target_matches(&v.target, model_name, "fuzz");
        if (!v.status && served && mr__serve_endpoint_has_body(v.ep)) {
            if (v.body_len == MR__BODY_CHUNKED) dechunk(rq.rest, rq.rest_len, &rq.body);
            else mr_buf_append(&rq.body, rq.rest, rq.rest_len < v.body_len ? rq.rest_len : (size_t)v.body_len);
            const char *body = rq.body.data ? rq.body.data : "";
            if (rq.body.len <= MAX_BODY && v.ep == MR__EP_PREDICT) check_predict(body, rq.body.len);
            else if (rq.body.len <= MAX_BODY) check_proto(v.ep, v.csv, body, rq.body.len);
        }
    }
    request_free(&rq);
    return 0;
}
