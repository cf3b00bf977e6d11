/* The MLflow scoring protocol and the Open Inference Protocol (KServe /
 * Triton REST, "v2") beside /v1/predict (serve_int.h, docs/serve.md): their
 * paths and Content-Type rule, their bodies turned into the mr__serve_req a
 * /v1/predict body's parse makes, their answers and errors, and the v2
 * metadata documents. No sockets, no locks, no globals: server.c drives it
 * from libmicrohttpd, tests/fuzz/fuzz_http.c and tests/unit/test_protocol.c
 * from buffers. Scoring is not here: a request parsed here is scored by
 * mr__serve_score like any other, so its numbers are /v1/predict's. */
#define _GNU_SOURCE /* memfd_create */
#include "serve_int.h"

#include "millrace/csv.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/mman.h>
#endif

/* ---- paths --------------------------------------------------------------------- */

/* The next path segment of p (up to '/' or the end) into *seg, *len. */
static const char *segment(const char *p, const char **seg, size_t *len)
{
    const char *e = strchr(p, '/');
    if (!e) e = p + strlen(p);
    *seg = p;
    *len = (size_t)(e - p);
    return e;
}

mr__serve_endpoint mr__proto_route(const char *url, mr__proto_target *t)
{
    memset(t, 0, sizeof(*t));
    if (!strcmp(url, "/invocations")) return MR__EP_INVOCATIONS;
    if (!strcmp(url, "/ping") || !strcmp(url, "/health")) return MR__EP_PING;
    if (!strcmp(url, "/version")) return MR__EP_VERSION;
    if (!strcmp(url, "/v2")) return MR__EP_V2_SERVER;
    if (!strcmp(url, "/v2/health/live")) return MR__EP_V2_LIVE;
    if (!strcmp(url, "/v2/health/ready")) return MR__EP_V2_READY;
    if (strncmp(url, "/v2/models/", 11) != 0) return MR__EP_NONE;
    /* /v2/models/NAME[/versions/V][/ready | /infer] */
    const char *p = segment(url + 11, &t->model, &t->model_len);
    if (!t->model_len) return MR__EP_NONE;
    if (!strncmp(p, "/versions/", 10)) {
        p = segment(p + 10, &t->version, &t->version_len);
        if (!t->version_len) return MR__EP_NONE;
    }
    if (!*p) return MR__EP_V2_MODEL;
    if (!strcmp(p, "/ready")) return MR__EP_V2_MODEL_READY;
    if (!strcmp(p, "/infer")) return MR__EP_V2_INFER;
    return MR__EP_NONE;
}

mr__proto mr__proto_of(mr__serve_endpoint ep)
{
    switch (ep) {
    case MR__EP_INVOCATIONS:
    case MR__EP_PING:
    case MR__EP_VERSION: return MR__PROTO_MLFLOW;
    case MR__EP_V2_LIVE:
    case MR__EP_V2_READY:
    case MR__EP_V2_SERVER:
    case MR__EP_V2_MODEL:
    case MR__EP_V2_MODEL_READY:
    case MR__EP_V2_INFER: return MR__PROTO_OIP;
    default: return MR__PROTO_NATIVE;
    }
}

int mr__serve_endpoint_has_body(mr__serve_endpoint ep)
{
    return ep == MR__EP_PREDICT || ep == MR__EP_INVOCATIONS || ep == MR__EP_V2_INFER;
}

const char *mr__serve_endpoint_label(mr__serve_endpoint ep)
{
    switch (ep) {
    case MR__EP_HEALTHZ: return "/healthz";
    case MR__EP_READYZ: return "/readyz";
    case MR__EP_METRICS: return "/metrics";
    case MR__EP_MODEL: return "/v1/model";
    case MR__EP_DRIFT: return "/v1/drift";
    case MR__EP_FEATURES: return "/v1/features";
    case MR__EP_PREDICT: return "/v1/predict";
    case MR__EP_INVOCATIONS: return "/invocations";
    case MR__EP_PING: return "/ping";
    case MR__EP_VERSION: return "/version";
    case MR__EP_V2_LIVE: return "/v2/health/live";
    case MR__EP_V2_READY: return "/v2/health/ready";
    case MR__EP_V2_SERVER: return "/v2";
    case MR__EP_V2_MODEL: return "/v2/models/{model}";
    case MR__EP_V2_MODEL_READY: return "/v2/models/{model}/ready";
    case MR__EP_V2_INFER: return "/v2/models/{model}/infer";
    default: return "other";
    }
}

/* The bytes [s, e) with blanks trimmed, compared with word (any case). */
static int trimmed_is(const char *s, const char *e, const char *word)
{
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    return (size_t)(e - s) == strlen(word) && !strncasecmp(s, word, (size_t)(e - s));
}

/* MLflow's scoring server reads the media type and its parameters
 * (";"-separated): a charset other than utf-8 and any other parameter are
 * a 415, as is a type other than JSON and CSV. Types and the charset are
 * compared in any case (RFC 9110 says they are case-insensitive). */
int mr__proto_content_type(const char *ct, int *csv, const char **msg)
{
    *csv = 0;
    if (!ct) return 0; /* no header: the body is JSON */
    const char *semi = strchr(ct, ';'), *end = semi ? semi : ct + strlen(ct);
    if (trimmed_is(ct, end, "text/csv")) *csv = 1;
    else if (!trimmed_is(ct, end, "application/json")) {
        *msg = "/invocations takes Content-Type application/json or text/csv";
        return 415;
    }
    while (semi) {
        const char *p = semi + 1, *next = strchr(p, ';'), *pe = next ? next : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(pe - p));
        if (!eq || !trimmed_is(p, eq, "charset")) {
            *msg = "unknown Content-Type parameter (only charset=utf-8 is taken)";
            return 415;
        }
        const char *v = eq + 1, *ve = pe;
        while (v < ve && (*v == ' ' || *v == '\t')) v++;
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) ve--;
        if (ve - v >= 2 && *v == '"' && ve[-1] == '"') {
            v++;
            ve--;
        }
        if (!trimmed_is(v, ve, "utf-8")) {
            *msg = "the scoring server only takes UTF-8 (charset=utf-8)";
            return 415;
        }
        semi = next;
    }
    return 0;
}

/* ---- errors -------------------------------------------------------------------- */

/* The MLflow error code (mlflow/protos/databricks.proto) for an HTTP status. */
static const char *mlflow_code(int status)
{
    switch (status) {
    case 400: return "BAD_REQUEST";
    case 401: return "UNAUTHENTICATED";
    case 404: return "ENDPOINT_NOT_FOUND";
    case 413: return "REQUEST_LIMIT_EXCEEDED";
    case 422: return "INVALID_PARAMETER_VALUE";
    case 501: return "NOT_IMPLEMENTED";
    case 503: return "TEMPORARILY_UNAVAILABLE";
    default: return status >= 500 ? "INTERNAL_ERROR" : "BAD_REQUEST";
    }
}

int mr__proto_error_json(mr_buf *out, mr__proto p, int status, const char *msg)
{
    if (p == MR__PROTO_NATIVE) {
        mr__serve_error_json(out, msg, NULL, -1);
        return status;
    }
    int wire = status == 422 ? 400 : status; /* both protocols answer a value that does not fit with a 400 */
    if (p == MR__PROTO_OIP) {
        mr__serve_error_json(out, msg, NULL, -1);
        return wire;
    }
    mr_buf_printf(out, "{\"error_code\": \"%s\", \"message\": ", mlflow_code(status));
    mr__serve_json_str(out, msg);
    mr_buf_puts(out, "}");
    return wire;
}

/* Writes pc's protocol's error for status and returns the status to answer. */
__attribute__((format(printf, 4, 5))) static int fail(const mr__proto_call *pc, mr_buf *err, int status,
                                                      const char *fmt, ...)
{
    char msg[600];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    err->len = 0;
    return mr__proto_error_json(err, mr__proto_of(pc->ep), status, msg);
}

/* ---- the memory a body will take --------------------------------------------------
 *
 * A JSON body is parsed once (mr__serve_json_cost prices that) and then
 * rebuilt into the document mr__serve_score reads: arrays of borrowed
 * values (a slot each, never more than the value itself was priced at) and
 * at most one column per input of the bundle (its array, its member and its
 * key). Records and columns that already have /v1/predict's shape are not
 * rebuilt at all. So twice the parse plus the columns bounds it, with room
 * for the few small objects of an answer's echo. A CSV body is read by the
 * CSV reader (its buffer holds the text; the table a string per field,
 * with offsets and validity) and each field becomes a JSON string. */
#define COST_COLUMN 640      /* an array (192), its member (128), the key (112 + its length), growth */
#define COST_CSV_FIELD 176   /* a JSON string (112) and its slot (32); the table's offset and bits (32) */
#define COST_CSV_READER 65536 /* the reader's state, the header's names, a chunk's bookkeeping */

size_t mr__proto_cost(const mr__proto_call *pc, const char *text, size_t len)
{
    size_t cols = 0, n_in = pc->b ? mr_bundle_n_inputs(pc->b) : 0;
    for (size_t i = 0; i < n_in; i++) cols += COST_COLUMN + strlen(mr_bundle_input_at(pc->b, i)->name);
    if (pc->csv) {
        size_t fields = 1; /* every field ends at a delimiter or a line end: an upper bound, whatever the quoting */
        for (size_t i = 0; i < len; i++) fields += text[i] == ',' || text[i] == '\n';
        return COST_CSV_READER + 8 * len + fields * COST_CSV_FIELD + cols;
    }
    return 2 * mr__serve_json_cost(text, len) + 4 * len + cols;
}

/* ---- MLflow: JSON bodies --------------------------------------------------------------- */

static const char *type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: return "an object";
    case JSON_ARRAY: return "a list";
    case JSON_STRING: return "a string";
    case JSON_INTEGER:
    case JSON_REAL: return "a number";
    case JSON_TRUE:
    case JSON_FALSE: return "a boolean";
    default: return "null";
    }
}

/* A document {"columns": cols}: cols is taken (its reference moves). */
static json_t *columns_doc(json_t *cols)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "columns", cols);
    return doc;
}

/* "x1, x2, plan" (cut after 400 bytes), the inputs in schema order, for messages. */
static void schema_list(const mr_bundle *b, char *buf, size_t cap)
{
    size_t at = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < mr_bundle_n_inputs(b) && at + 1 < cap; i++) {
        int w = snprintf(buf + at, cap - at, "%s%s", i ? ", " : "", mr_bundle_input_at(b, i)->name);
        if (w < 0 || (size_t)w >= cap - at) {
            snprintf(buf + (cap > 5 ? cap - 5 : 0), cap > 5 ? 5 : cap, "...");
            break;
        }
        at += (size_t)w;
    }
}

/* A flag per input of b (NULL: out of memory; mr_free it), for the checks
 * that mark the inputs a body names: one pass over the body, whatever its
 * number of names. */
static uint8_t *input_flags(const mr_bundle *b)
{
    size_t n = mr_bundle_n_inputs(b);
    return mr_calloc(n ? n : 1, 1);
}

/* Rows that are lists of values in schema order: each must have one value
 * per input. Fills req (columnar). */
static int positional(const mr__proto_call *pc, const char *what, json_t *rows, mr__serve_req *req, mr_buf *err)
{
    size_t n_in = mr_bundle_n_inputs(pc->b), i;
    json_t *r;
    json_array_foreach(rows, i, r)
    {
        if (!json_is_array(r) || json_array_size(r) != n_in) {
            char names[420];
            schema_list(pc->b, names, sizeof(names));
            if (!json_is_array(r))
                return fail(pc, err, 400, "%s: row %zu is %s; a row in schema order is a list of %zu values (%s)", what,
                            i, type_name(r), n_in, names);
            return fail(pc, err, 400, "%s: row %zu has %zu values; the model takes %zu, in this order: %s", what, i,
                        json_array_size(r), n_in, names);
        }
    }
    req->pos = mr_calloc(n_in ? n_in : 1, sizeof(*req->pos));
    if (!req->pos) return fail(pc, err, 500, "out of memory");
    for (i = 0; i < n_in; i++) req->pos[i] = (int32_t)i;
    req->doc = json_incref(rows);
    req->n_rows = json_array_size(rows);
    return 0;
}

/* Records ({column: value} each). fill: a record without an input reads it
 * as null (pandas' frame of records), and an input every record lacks is
 * missing (400, INVALID_PARAMETER_VALUE); else each record is a /v1/predict
 * row. The rows are the request's own list (no copy). */
static int records(const mr__proto_call *pc, const char *what, json_t *rows, int fill, mr__serve_req *req,
                   mr_buf *err)
{
    size_t i, n = json_array_size(rows);
    json_t *r;
    json_array_foreach(rows, i, r) if (!json_is_object(r))
        return fail(pc, err, 400, "%s must be a list of records (objects of column: value); item %zu is %s", what, i,
                    type_name(r));
    if (fill && n) {
        uint8_t *seen = input_flags(pc->b);
        if (!seen) return fail(pc, err, 500, "out of memory");
        json_array_foreach(rows, i, r)
        {
            const char *key;
            json_t *v;
            json_object_foreach(r, key, v)
            {
                ssize_t k = mr_bundle_input_index(pc->b, key);
                if (k >= 0) seen[k] = 1;
            }
        }
        const char *missing = NULL;
        for (size_t k = 0; !missing && k < mr_bundle_n_inputs(pc->b); k++)
            if (mr_bundle_input_at(pc->b, k)->required && !seen[k]) missing = mr_bundle_input_at(pc->b, k)->name;
        mr_free(seen);
        if (missing) return fail(pc, err, 422, "input column '%s' is missing from every record", missing);
    }
    req->doc = json_object();
    json_object_set(req->doc, "rows", rows);
    req->absent_null = fill;
    req->n_rows = n;
    return 0;
}

/* An object of columns: lists of one length, or scalars (one row). */
static int columns_object(const mr__proto_call *pc, const char *what, json_t *obj, mr__serve_req *req, mr_buf *err)
{
    const char *key;
    json_t *v;
    size_t n = SIZE_MAX;
    int lists = -1;
    json_object_foreach(obj, key, v)
    {
        int is_list = json_is_array(v);
        if (lists >= 0 && is_list != lists)
            return fail(pc, err, 400, "%s: every column must be a list (or every one a single value); '%s' is %s", what,
                        key, type_name(v));
        lists = is_list;
        if (is_list && n != SIZE_MAX && json_array_size(v) != n)
            return fail(pc, err, 400, "%s: every column must have the same length ('%s' has %zu values, another %zu)",
                        what, key, json_array_size(v), n);
        if (is_list) n = json_array_size(v);
    }
    if (lists == 1) { /* /v1/predict's columns as they are */
        req->doc = json_object();
        json_object_set(req->doc, "columns", obj);
        req->n_rows = n;
    } else { /* one row of scalars: each a column of one */
        json_t *cols = json_object();
        json_object_foreach(obj, key, v)
        {
            json_t *a = json_array();
            json_array_append(a, v);
            json_object_set_new(cols, key, a);
        }
        req->doc = columns_doc(cols);
        req->n_rows = lists == 0 ? 1 : 0;
    }
    req->columnar = 1;
    return 0;
}

/* "instances" and "inputs" (TensorFlow Serving's forms, as MLflow reads
 * them): a list of records, a list of lists in schema order, a list of
 * values (a one-input model), or an object of columns. fill: records read
 * as pandas does (inputs) rather than one value per record (instances). */
static int tensor_form(const mr__proto_call *pc, const char *what, json_t *v, int fill, mr__serve_req *req,
                       mr_buf *err)
{
    if (json_is_object(v)) return columns_object(pc, what, v, req, err);
    if (!json_is_array(v))
        return fail(pc, err, 400, "\"%s\" must be a list of records, a list of rows, or an object of columns; got %s",
                    what, type_name(v));
    json_t *first = json_array_get(v, 0);
    if (!first || json_is_object(first)) return records(pc, what, v, fill, req, err);
    if (json_is_array(first)) return positional(pc, what, v, req, err);
    if (mr_bundle_n_inputs(pc->b) != 1)
        return fail(pc, err, 400, "\"%s\": a list of single values needs a model of one input; this one has %zu", what,
                    mr_bundle_n_inputs(pc->b));
    size_t i;
    json_t *x;
    json_array_foreach(v, i, x) if (json_is_array(x) || json_is_object(x))
        return fail(pc, err, 400, "\"%s\": item %zu is %s among single values", what, i, type_name(x));
    json_t *cols = json_object();
    json_object_set(cols, mr_bundle_input_at(pc->b, 0)->name, v);
    req->doc = columns_doc(cols);
    req->columnar = 1;
    req->n_rows = json_array_size(v);
    return 0;
}

/* pandas' "split" orient: {"columns": [...], "data": [[...], ...], "index": [...]}. */
static int dataframe_split(const mr__proto_call *pc, json_t *v, mr__serve_req *req, mr_buf *err)
{
    if (!json_is_object(v)) return fail(pc, err, 400, "\"dataframe_split\" must be an object; got %s", type_name(v));
    const char *key;
    json_t *x;
    json_object_foreach(v, key, x) if (strcmp(key, "columns") && strcmp(key, "data") && strcmp(key, "index"))
        return fail(pc, err, 400, "\"dataframe_split\" takes \"columns\", \"data\" and \"index\"; it has \"%s\"", key);
    json_t *cols = json_object_get(v, "columns"), *data = json_object_get(v, "data");
    json_t *index = json_object_get(v, "index");
    if (!json_is_array(data))
        return fail(pc, err, 400, "\"dataframe_split\" needs \"data\", a list of rows%s", data ? "" : " (it has none)");
    if (!cols) return positional(pc, "dataframe_split", data, req, err); /* no names: schema order */
    if (!json_is_array(cols)) return fail(pc, err, 400, "\"dataframe_split\": \"columns\" must be a list of names");
    size_t w = json_array_size(cols), i, n_in = mr_bundle_n_inputs(pc->b);
    /* where each input is in a row; an input named twice is ambiguous; other columns are dropped */
    int32_t *pos = mr_malloc((n_in ? n_in : 1) * sizeof(*pos));
    if (!pos) return fail(pc, err, 500, "out of memory");
    for (i = 0; i < n_in; i++) pos[i] = -1;
    json_array_foreach(cols, i, x)
    {
        ssize_t k = json_is_string(x) ? mr_bundle_input_index(pc->b, json_string_value(x)) : -1;
        int st = !json_is_string(x) ? fail(pc, err, 400, "\"dataframe_split\": column %zu is %s, not a name", i,
                                           type_name(x))
                 : k >= 0 && pos[k] >= 0 ? fail(pc, err, 400, "\"dataframe_split\": column '%s' is named twice",
                                                json_string_value(x))
                 : i > INT32_MAX         ? fail(pc, err, 413, "\"dataframe_split\" names too many columns")
                                         : 0;
        if (st) {
            mr_free(pos);
            return st;
        }
        if (k >= 0) pos[k] = (int32_t)i;
    }
    int st = 0;
    json_array_foreach(data, i, x)
    {
        if (!json_is_array(x)) {
            st = fail(pc, err, 400, "\"dataframe_split\": row %zu of \"data\" is %s, not a list", i, type_name(x));
            break;
        }
        if (json_array_size(x) != w) {
            st = fail(pc, err, 400, "\"dataframe_split\": row %zu of \"data\" has %zu values; \"columns\" names %zu",
                      i, json_array_size(x), w);
            break;
        }
    }
    if (!st && index && (!json_is_array(index) || json_array_size(index) != json_array_size(data)))
        st = fail(pc, err, 400, "\"dataframe_split\": \"index\" must be a list of one label per row");
    if (st) {
        mr_free(pos);
        return st;
    }
    req->pos = pos;
    req->doc = json_incref(data);
    req->n_rows = json_array_size(data);
    return 0;
}

static const char *const mlflow_forms[] = {"dataframe_split", "dataframe_records", "instances", "inputs"};

static int mlflow_json(const mr__proto_call *pc, json_t *doc, mr__serve_req *req, mr_buf *err)
{
    static const char need[] = "the body must be a JSON object with exactly one of \"dataframe_split\", "
                               "\"dataframe_records\", \"instances\", \"inputs\"";
    if (!json_is_object(doc)) return fail(pc, err, 400, "%s; got %s", need, type_name(doc));
    int form = -1, n = 0;
    for (int f = 0; f < 4; f++)
        if (json_object_get(doc, mlflow_forms[f])) {
            form = f;
            n++;
        }
    if (n != 1) return fail(pc, err, 400, "%s (it has %s)", need, n ? "several" : "none of them");
    json_t *v = json_object_get(doc, mlflow_forms[form]);
    switch (form) {
    case 0: return dataframe_split(pc, v, req, err);
    case 1:
        if (!json_is_array(v))
            return fail(pc, err, 400, "\"dataframe_records\" must be a list of records; got %s", type_name(v));
        return records(pc, "dataframe_records", v, 1, req, err);
    case 2: return tensor_form(pc, "instances", v, 0, req, err);
    default: return tensor_form(pc, "inputs", v, 1, req, err);
    }
}

/* ---- MLflow: CSV bodies ---------------------------------------------------------
 *
 * Read by the project's CSV reader, exactly as `millrace predict` reads a
 * CSV file: every column declared a string, so each value reaches the
 * bundle's text rules (mr_bundle_coerce_value with text) as it was written;
 * the reader's quoting, null tokens, BOM and line ends all apply. The
 * reader opens a path, so the body goes to an anonymous memory file
 * (memfd_create) that the reader opens through /proc/self/fd: nothing
 * touches a disk, and the reader's code is the one that is fuzzed. */

/* The reader's message without the memory file's path. */
static int csv_fail(const mr__proto_call *pc, mr_buf *err, mr_status st, const mr_error *e)
{
    if (st == MR_E_NOMEM) return fail(pc, err, 500, "out of memory");
    if (st == MR_E_IO) return fail(pc, err, 500, "cannot read the CSV body: %s", e->msg);
    if (e->line > 0) return fail(pc, err, 400, "CSV body, line %ld: %s", e->line, e->msg);
    return fail(pc, err, 400, "CSV body: %s", e->msg);
}

static int mlflow_csv(const mr__proto_call *pc, const char *body, size_t len, mr__serve_req *req, mr_buf *err)
{
#ifdef __linux__
    int rc = 0, fd = memfd_create("millrace-csv-body", MFD_CLOEXEC);
    mr_csv_reader *r = NULL;
    mr_table *t = NULL;
    const char **names = NULL;
    mr_dtype *types = NULL;
    mr_error e;
    mr_error_init(&e);
    if (fd < 0) {
        rc = fail(pc, err, 500, "cannot hold the CSV body: %s", strerror(errno));
        goto done;
    }
    for (size_t at = 0; at < len;) {
        ssize_t w = write(fd, body + at, len - at);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            rc = fail(pc, err, 500, "cannot hold the CSV body: %s", strerror(errno));
            goto done;
        }
        at += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    /* the header: its names, all declared strings for the read */
    mr_csv_options o;
    mr_csv_options_init(&o);
    o.sample_rows = 1;
    o.threads = 1;         /* a connection's thread: no pool */
    o.chunk_size = 4096;   /* the window for the header (it grows for a longer record) */
    mr_status st = mr_csv_reader_open(path, &o, &r, &e);
    if (st != MR_OK) {
        rc = csv_fail(pc, err, st, &e);
        goto done;
    }
    size_t n_cols = mr_csv_reader_n_cols(r);
    names = mr_calloc(n_cols ? n_cols : 1, sizeof(*names));
    types = mr_calloc(n_cols ? n_cols : 1, sizeof(*types));
    if (!names || !types) {
        rc = fail(pc, err, 500, "out of memory");
        goto done;
    }
    for (size_t j = 0; j < n_cols; j++) {
        names[j] = mr_csv_reader_col_name(r, j);
        types[j] = MR_T_STRING;
    }
    mr_csv_options_init(&o);
    o.schema_names = names;
    o.schema_types = types;
    o.n_schema = n_cols;
    o.threads = 1;
    st = mr_csv_read(path, &o, &t, NULL, &e);
    if (st != MR_OK) {
        rc = csv_fail(pc, err, st, &e);
        goto done;
    }
    if (t->n_rows > pc->max_rows) {
        rc = fail(pc, err, 413, "too many rows in one request (%zu; at most %zu)", (size_t)t->n_rows, pc->max_rows);
        goto done;
    }
    json_t *cols = json_object();
    for (size_t i = 0; i < mr_bundle_n_inputs(pc->b); i++) {
        const char *name = mr_bundle_input_at(pc->b, i)->name;
        const mr_column *c = mr_table_column(t, name);
        if (!c) continue;
        json_t *a = json_array();
        for (size_t k = 0; k < t->n_rows; k++) {
            size_t l = 0;
            const char *s = mr_column_is_null(c, k) ? NULL : mr_column_str(c, k, &l);
            json_array_append_new(a, s ? json_stringn_nocheck(s, l) : json_null());
        }
        json_object_set_new(cols, name, a);
    }
    req->doc = columns_doc(cols);
    req->columnar = 1;
    req->text = 1;
    req->n_rows = t->n_rows;
done:
    mr_table_free(t);
    mr_csv_reader_close(r, NULL);
    mr_free((void *)names);
    mr_free(types);
    if (fd >= 0) close(fd);
    return rc;
#else
    (void)body;
    (void)len;
    (void)req;
    return fail(pc, err, 415, "text/csv bodies need memfd_create (Linux); send JSON");
#endif
}

/* ---- Open Inference Protocol -------------------------------------------------------- */

typedef enum dtype { DT_BOOL, DT_INT, DT_UINT, DT_FP, DT_BYTES } dtype;

typedef struct oip_type {
    const char *name;
    dtype kind;
    int bits;
} oip_type;

static const oip_type oip_types[] = {
    {"BOOL", DT_BOOL, 1},   {"UINT8", DT_UINT, 8},  {"UINT16", DT_UINT, 16}, {"UINT32", DT_UINT, 32},
    {"UINT64", DT_UINT, 64}, {"INT8", DT_INT, 8},    {"INT16", DT_INT, 16},   {"INT32", DT_INT, 32},
    {"INT64", DT_INT, 64},  {"FP16", DT_FP, 16},    {"FP32", DT_FP, 32},     {"FP64", DT_FP, 64},
    {"BYTES", DT_BYTES, 0},
};

static const oip_type *oip_type_of(const char *name)
{
    for (size_t i = 0; i < sizeof(oip_types) / sizeof(oip_types[0]); i++)
        if (!strcmp(oip_types[i].name, name)) return &oip_types[i];
    return NULL;
}

/* Whether v is an element of type t: BOOL true/false, integers in range,
 * FP any JSON number (kept as the double it is, not rounded to the
 * declared width, so it scores as the same number in /v1/predict), BYTES a
 * string; null, a missing value, fits every type. */
static int elem_fits(const oip_type *t, const json_t *v)
{
    if (json_is_null(v)) return 1;
    switch (t->kind) {
    case DT_BOOL: return json_is_boolean(v);
    case DT_FP: return json_is_number(v);
    case DT_BYTES: return json_is_string(v);
    case DT_INT:
    case DT_UINT: {
        if (!json_is_integer(v)) return 0;
        json_int_t x = json_integer_value(v);
        if (t->kind == DT_UINT) return x >= 0 && (t->bits == 64 || x < ((json_int_t)1 << t->bits));
        if (t->bits == 64) return 1;
        json_int_t lim = (json_int_t)1 << (t->bits - 1);
        return x >= -lim && x < lim;
    }
    }
    return 0;
}

#define OIP_MAX_RANK 2 /* a column [N] or [N, 1]; the matrix [N, n_inputs] */

/* One input tensor, checked. */
typedef struct tensor {
    const char *name;
    const oip_type *type;
    uint64_t shape[OIP_MAX_RANK];
    size_t rank;
    json_t *data;
} tensor;

/* A walk of a tensor's data in row-major order: leaf k goes to
 * cols[k % n_cols]. */
typedef struct walk {
    const tensor *t;
    json_t **cols;
    size_t n_cols;
    size_t k;
} walk;

/* Walks a (an array at depth `depth` of the shape): either the values of
 * the dimensions left, flat (product of shape[depth..] of them), or one
 * array per index of shape[depth]. Returns NULL or the error's text. */
static const char *walk_data(walk *w, const json_t *a, size_t depth, char *why, size_t cap)
{
    const tensor *t = w->t;
    size_t n = json_array_size(a);
    if (n && json_is_array(json_array_get(a, 0))) {
        if (depth + 1 >= t->rank || n != t->shape[depth]) {
            snprintf(why, cap, "input '%s': its nested data does not have the shape it gives", t->name);
            return why;
        }
        for (size_t i = 0; i < n; i++) {
            const json_t *x = json_array_get(a, i);
            if (!json_is_array(x)) {
                snprintf(why, cap, "input '%s': its data mixes lists and values", t->name);
                return why;
            }
            const char *bad = walk_data(w, x, depth + 1, why, cap);
            if (bad) return bad;
        }
        return NULL;
    }
    uint64_t want = 1;
    for (size_t d = depth; d < t->rank; d++) {
        if (t->shape[d] && want > UINT64_MAX / t->shape[d]) want = UINT64_MAX; /* no list is that long */
        else want *= t->shape[d];
    }
    if ((uint64_t)n != want) {
        snprintf(why, cap, "input '%s': %zu values where its shape holds %llu", t->name, n, (unsigned long long)want);
        return why;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *x = json_array_get(a, i);
        if (json_is_array(x)) {
            snprintf(why, cap, "input '%s': its data mixes lists and values", t->name);
            return why;
        }
        if (!elem_fits(t->type, x)) {
            if (json_is_number(x))
                snprintf(why, cap, "input '%s': datatype %s, but value %zu is %.10g", t->name, t->type->name, w->k,
                         json_number_value(x));
            else
                snprintf(why, cap, "input '%s': datatype %s, but value %zu is %s", t->name, t->type->name, w->k,
                         type_name(x));
            return why;
        }
        json_array_append(w->cols[w->k % w->n_cols], x);
        w->k++;
    }
    return NULL;
}

/* inputs[i] checked into *t: name, datatype, shape (non-negative integers,
 * rank 1..2), data (a list). */
static int oip_tensor(const mr__proto_call *pc, json_t *in, size_t i, tensor *t, mr_buf *err)
{
    memset(t, 0, sizeof(*t));
    if (!json_is_object(in)) return fail(pc, err, 400, "inputs[%zu] must be an object; got %s", i, type_name(in));
    json_t *name = json_object_get(in, "name"), *shape = json_object_get(in, "shape"),
           *dt = json_object_get(in, "datatype"), *data = json_object_get(in, "data");
    if (!json_is_string(name)) return fail(pc, err, 400, "inputs[%zu]: \"name\" must be a string", i);
    t->name = json_string_value(name);
    if (!json_is_string(dt)) return fail(pc, err, 400, "input '%s': \"datatype\" must be a string", t->name);
    t->type = oip_type_of(json_string_value(dt));
    if (!t->type)
        return fail(pc, err, 400, "input '%s': unknown datatype '%s' (BOOL, INT8..INT64, UINT8..UINT64, FP16, FP32, "
                                  "FP64, BYTES)", t->name, json_string_value(dt));
    if (!json_is_array(shape) || json_array_size(shape) < 1 || json_array_size(shape) > OIP_MAX_RANK)
        return fail(pc, err, 400, "input '%s': \"shape\" must be [N] or [N, M]", t->name);
    t->rank = json_array_size(shape);
    for (size_t d = 0; d < t->rank; d++) {
        json_t *x = json_array_get(shape, d);
        if (!json_is_integer(x) || json_integer_value(x) < 0)
            return fail(pc, err, 400, "input '%s': \"shape\" holds %s, not a non-negative integer", t->name,
                        type_name(x));
        t->shape[d] = (uint64_t)json_integer_value(x);
    }
    if (!json_is_array(data)) return fail(pc, err, 400, "input '%s': \"data\" must be a list", t->name);
    t->data = data;
    return 0;
}

/* {"id", "parameters", "inputs": [{"name", "shape", "datatype", "data"}, ...], "outputs": [{"name"}, ...]}:
 * one input per column (shape [N] or [N, 1]), or one matrix [N, n_inputs]
 * in schema order whose name is none of the columns'. */
static int oip_json(const mr__proto_call *pc, json_t *doc, mr__serve_req *req, mr_buf *err)
{
    int rc = 0;
    tensor *ts = NULL;
    json_t **cols = NULL;
    uint8_t *seen = NULL;
    if (!json_is_object(doc))
        return fail(pc, err, 400, "the body must be a JSON object with \"inputs\"; got %s", type_name(doc));
    json_t *id = json_object_get(doc, "id"), *params = json_object_get(doc, "parameters");
    json_t *inputs = json_object_get(doc, "inputs"), *outputs = json_object_get(doc, "outputs");
    if (id && !json_is_string(id)) return fail(pc, err, 400, "\"id\" must be a string");
    if (params && !json_is_object(params)) return fail(pc, err, 400, "\"parameters\" must be an object");
    if (!json_is_array(inputs) || !json_array_size(inputs))
        return fail(pc, err, 400, "\"inputs\" must be a non-empty list of tensors {name, shape, datatype, data}");
    const mr_bundle *b = pc->b;
    size_t n_out = mr_bundle_n_outputs(b), i;
    json_t *x;
    if (outputs) {
        if (!json_is_array(outputs)) return fail(pc, err, 400, "\"outputs\" must be a list of {\"name\": ...}");
        json_array_foreach(outputs, i, x)
        {
            const char *on = json_string_value(json_object_get(x, "name"));
            if (!on) return fail(pc, err, 400, "outputs[%zu] must be an object with a \"name\"", i);
            size_t q = 0;
            while (q < n_out && strcmp(mr_bundle_output_name(b, q), on)) q++;
            if (q == n_out)
                return fail(pc, err, 400, "unknown output '%s' (the model's outputs: %s%s)", on,
                            mr_bundle_output_name(b, 0), n_out > 1 ? ", ..." : "");
        }
    }
    size_t n_in = json_array_size(inputs), n_schema = mr_bundle_n_inputs(b);
    ts = mr_calloc(n_in, sizeof(*ts));
    cols = mr_calloc(n_schema ? n_schema : 1, sizeof(*cols));
    if (!ts || !cols) {
        rc = fail(pc, err, 500, "out of memory");
        goto done;
    }
    for (i = 0; i < n_in; i++) {
        rc = oip_tensor(pc, json_array_get(inputs, i), i, &ts[i], err);
        if (rc) goto done;
    }
    int matrix = n_in == 1 && mr_bundle_input_index(b, ts[0].name) < 0 && ts[0].rank == 2 && n_schema > 0 &&
                 ts[0].shape[1] == n_schema;
    uint64_t n_rows = ts[0].shape[0];
    if (!matrix) {
        seen = input_flags(b);
        if (!seen) {
            rc = fail(pc, err, 500, "out of memory");
            goto done;
        }
        for (i = 0; i < n_in; i++) {
            const tensor *t = &ts[i];
            ssize_t k = mr_bundle_input_index(b, t->name);
            if (k >= 0 && seen[k]) {
                rc = fail(pc, err, 400, "input '%s' is given twice", t->name);
                goto done;
            }
            if (k >= 0) seen[k] = 1;
            if (k < 0) {
                char names[420];
                schema_list(b, names, sizeof(names));
                rc = fail(pc, err, 400, "unknown input '%s': the model's inputs are %s (or one [N, %zu] matrix of them "
                                        "in that order)", t->name, names, n_schema);
                goto done;
            }
            if (t->rank == 2 && t->shape[1] != 1) {
                rc = fail(pc, err, 400, "input '%s': shape [%llu, %llu]; a column is [N] or [N, 1]", t->name,
                          (unsigned long long)t->shape[0], (unsigned long long)t->shape[1]);
                goto done;
            }
            if (t->shape[0] != n_rows) {
                rc = fail(pc, err, 400, "inputs '%s' and '%s' have different numbers of rows (%llu, %llu)", ts[0].name,
                          t->name, (unsigned long long)n_rows, (unsigned long long)t->shape[0]);
                goto done;
            }
        }
    }
    if (n_rows > pc->max_rows) {
        rc = fail(pc, err, 413, "too many rows in one request (%llu; at most %zu)", (unsigned long long)n_rows,
                  pc->max_rows);
        goto done;
    }
    /* the columns: the matrix's in schema order, else one per input */
    json_t *obj = json_object();
    char why[400];
    for (i = 0; i < (matrix ? 1 : n_in); i++) {
        size_t w = matrix ? n_schema : 1;
        for (size_t c = 0; c < w; c++) {
            cols[c] = json_array();
            json_object_set_new(obj, matrix ? mr_bundle_input_at(b, c)->name : ts[i].name, cols[c]);
        }
        walk wk = {&ts[i], cols, w, 0};
        const char *bad = walk_data(&wk, ts[i].data, 0, why, sizeof(why));
        if (bad) {
            json_decref(obj);
            rc = fail(pc, err, 400, "%s", bad);
            goto done;
        }
    }
    req->doc = columns_doc(obj);
    req->columnar = 1;
    req->n_rows = (size_t)n_rows;
    /* what the answer echoes */
    req->reply = json_object();
    json_object_set_new(req->reply, "model_name", json_string(pc->model_name ? pc->model_name : "model"));
    if (id) json_object_set(req->reply, "id", id);
    if (outputs) {
        json_t *names = json_array();
        json_array_foreach(outputs, i, x) json_array_append(names, json_object_get(x, "name"));
        json_object_set_new(req->reply, "outputs", names);
    }
done:
    mr_free(ts);
    mr_free(cols);
    mr_free(seen);
    return rc;
}

/* ---- parsing --------------------------------------------------------------------- */

int mr__proto_parse(const mr__proto_call *pc, const char *body, size_t len, mr__serve_req *req, mr_buf *err_body)
{
    memset(req, 0, sizeof(*req));
    req->proto = mr__proto_of(pc->ep);
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *doc = NULL;
    int st;
    if (pc->csv) {
        st = mlflow_csv(pc, body, len, req, err_body);
    } else {
        json_error_t je;
        doc = json_loadb(body ? body : "", body ? len : 0, 0, &je);
        if (!doc && mr_alloc_failures_here() == oom0) {
            st = fail(pc, err_body, 400, "malformed JSON at line %d, column %d (byte %d): %s", je.line, je.column,
                      je.position, je.text);
        } else if (!doc) {
            st = 500;
        } else {
            st = pc->ep == MR__EP_V2_INFER ? oip_json(pc, doc, req, err_body) : mlflow_json(pc, doc, req, err_body);
        }
    }
    /* the body's own tree goes; what the request keeps holds its own references */
    json_decref(doc);
    if (st == 0 && (!req->doc || (req->proto == MR__PROTO_OIP && !req->reply))) st = 500;
    if (st == 0 && req->n_rows > pc->max_rows)
        st = fail(pc, err_body, 413, "too many rows in one request (%zu; at most %zu)", req->n_rows, pc->max_rows);
    if (mr_alloc_failures_here() != oom0) st = 500; /* jansson drops what it cannot allocate: any failure is one */
    if (st == 500) {
        err_body->len = 0;
        mr__proto_error_json(err_body, req->proto, 500, "out of memory");
    }
    if (st) {
        mr__serve_req_clear(req);
        req->n_rows = 0;
    }
    return st;
}

/* ---- answers ------------------------------------------------------------------- */

void mr__proto_answer(mr_buf *out, const mr__serve_req *req, const mr_bundle *b, const char *version,
                      const double *pred, size_t k)
{
    size_t n = req->n_rows, n_out = mr_bundle_n_outputs(b);
    if (req->proto == MR__PROTO_MLFLOW) {
        mr_buf_puts(out, "{\"predictions\": [");
        for (size_t r = 0; r < n; r++) {
            if (r) mr_buf_puts(out, ", ");
            if (k == 1) {
                mr__serve_json_double(out, pred[r]);
                continue;
            }
            mr_buf_puts(out, "[");
            for (size_t c = 0; c < k; c++) {
                if (c) mr_buf_puts(out, ", ");
                mr__serve_json_double(out, pred[r * k + c]);
            }
            mr_buf_puts(out, "]");
        }
        mr_buf_puts(out, "]}");
        return;
    }
    const char *model = json_string_value(json_object_get(req->reply, "model_name"));
    mr_buf_puts(out, "{\"model_name\": ");
    mr__serve_json_str(out, model ? model : "model");
    mr_buf_puts(out, ", \"model_version\": ");
    mr__serve_json_str(out, version);
    json_t *id = json_object_get(req->reply, "id"), *asked = json_object_get(req->reply, "outputs");
    if (id) { /* a string without NUL bytes: the parse refuses \u0000 (no JSON_ALLOW_NUL) */
        mr_buf_puts(out, ", \"id\": ");
        mr__serve_json_str(out, json_string_value(id));
    }
    mr_buf_puts(out, ", \"outputs\": [");
    size_t n_listed = asked ? json_array_size(asked) : n_out, written = 0;
    for (size_t a = 0; a < n_listed; a++) {
        size_t q = a;
        if (asked) {
            const char *on = json_string_value(json_array_get(asked, a));
            for (q = 0; q < n_out && strcmp(mr_bundle_output_name(b, q), on ? on : ""); q++) {
            }
            if (q == n_out) continue; /* a reload between parse and score changed the outputs */
        }
        if (written++) mr_buf_puts(out, ", ");
        mr_buf_puts(out, "{\"name\": ");
        mr__serve_json_str(out, mr_bundle_output_name(b, q));
        mr_buf_printf(out, ", \"shape\": [%zu], \"datatype\": \"FP64\", \"data\": [", n);
        for (size_t r = 0; r < n; r++) {
            if (r) mr_buf_puts(out, ", ");
            mr__serve_json_double(out, pred[r * k + q]);
        }
        mr_buf_puts(out, "]}");
    }
    mr_buf_puts(out, "]}");
}

/* ---- the model's name and the v2 metadata ----------------------------------------------- */

int mr__proto_model_name(const mr_bundle *b, char *out)
{
    snprintf(out, MR__MODEL_NAME_MAX + 1, "model");
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *man = json_loads(mr_bundle_manifest_json(b), 0, NULL);
    const char *name = json_string_value(json_object_get(man, "name"));
    size_t n = name ? strlen(name) : 0;
    int ok = n > 0 && n <= MR__MODEL_NAME_MAX;
    for (size_t i = 0; ok && i < n; i++) {
        char c = name[i];
        ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
             c == '-';
    }
    if (ok) memcpy(out, name, n + 1);
    json_decref(man);
    return mr_alloc_failures_here() != oom0 ? -1 : 0;
}

int mr__proto_target_matches(const mr__proto_target *t, const char *name, const char *version)
{
    if (t->model_len != strlen(name) || memcmp(t->model, name, t->model_len)) return 0;
    return !t->version || (t->version_len == strlen(version) && !memcmp(t->version, version, t->version_len));
}

void mr__proto_v2_server_json(mr_buf *out)
{
    mr_buf_puts(out, "{\"name\": \"millrace\", \"version\": ");
    mr__serve_json_str(out, mr_version());
    mr_buf_puts(out, ", \"extensions\": []}");
}

/* The v2 datatype an input's values are sent as (its column type). */
static const char *v2_datatype(const mr_bundle_input *in)
{
    switch (mr_bundle_input_column_type(in)) {
    case MR_T_STRING: return "BYTES";
    case MR_T_INT64: return "INT64";
    case MR_T_BOOL: return "BOOL";
    default: return "FP64";
    }
}

void mr__proto_v2_model_json(mr_buf *out, const mr_bundle *b, const char *name, const char *version)
{
    mr_buf_puts(out, "{\"name\": ");
    mr__serve_json_str(out, name);
    mr_buf_puts(out, ", \"versions\": [");
    mr__serve_json_str(out, version);
    mr_buf_puts(out, "], \"platform\": \"millrace\", \"inputs\": [");
    for (size_t i = 0; i < mr_bundle_n_inputs(b); i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        mr_buf_puts(out, i ? ", {\"name\": " : "{\"name\": ");
        mr__serve_json_str(out, in->name);
        mr_buf_printf(out, ", \"datatype\": \"%s\", \"shape\": [-1]}", v2_datatype(in));
    }
    mr_buf_puts(out, "], \"outputs\": [");
    for (size_t q = 0; q < mr_bundle_n_outputs(b); q++) {
        mr_buf_puts(out, q ? ", {\"name\": " : "{\"name\": ");
        mr__serve_json_str(out, mr_bundle_output_name(b, q));
        mr_buf_puts(out, ", \"datatype\": \"FP64\", \"shape\": [-1]}");
    }
    mr_buf_puts(out, "]}");
}

void mr__proto_v2_ready_json(mr_buf *out, const char *name, int ready)
{
    mr_buf_puts(out, "{");
    if (name) {
        mr_buf_puts(out, "\"name\": ");
        mr__serve_json_str(out, name);
        mr_buf_puts(out, ", ");
    }
    mr_buf_printf(out, "\"ready\": %s}", ready ? "true" : "false");
}
