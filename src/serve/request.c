/* The model server's request handling that needs no socket (serve_int.h):
 * header checks made before any body byte is read, the memory estimate
 * and shape check of a predict body, fitting its rows to the bundle and
 * writing the answers. No I/O, no locks, no globals: server.c drives it
 * from libmicrohttpd, tests/fuzz/fuzz_http.c from a buffer. */
#include "serve_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- headers ------------------------------------------------------------------ */

void mr__serve_head_init(mr__serve_head *h) { memset(h, 0, sizeof(*h)); }

/* A Content-Length value as libmicrohttpd reads it: decimal digits and
 * nothing else (no sign, no blanks, no list). -1 if it is not one. */
static int parse_length(const char *v, uint64_t *out)
{
    uint64_t x = 0;
    if (!*v) return -1;
    for (; *v; v++) {
        if (*v < '0' || *v > '9') return -1;
        if (x > (UINT64_MAX - 9) / 10) return -1;
        x = x * 10 + (uint64_t)(*v - '0');
    }
    *out = x;
    return 0;
}

/* Whether the last element of a comma-separated coding list is "chunked". */
static int last_coding_chunked(const char *v)
{
    const char *comma = strrchr(v, ',');
    const char *s = comma ? comma + 1 : v, *e = s + strlen(s);
    while (s < e && (*s == ' ' || *s == '\t')) s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t')) e--;
    return e - s == 7 && !strncasecmp(s, "chunked", 7);
}

void mr__serve_head_add(mr__serve_head *h, const char *name, const char *value)
{
    if (!name) return;
    if (!value) value = "";
    if (!strcasecmp(name, "Content-Length")) {
        uint64_t v = 0;
        if (parse_length(value, &v) != 0) h->content_length_bad = 1;
        else if (h->n_content_length == 0) h->content_length = v;
        else if (v != h->content_length) h->content_length_bad = 1;
        h->n_content_length++;
    } else if (!strcasecmp(name, "Transfer-Encoding")) {
        if (h->n_transfer_encoding == 0) {
            /* libmicrohttpd decodes chunks only for this exact value */
            h->te_chunked = !strcasecmp(value, "chunked");
            h->te_chunked_last = last_coding_chunked(value);
        }
        h->n_transfer_encoding++;
    } else if (!strcasecmp(name, "Authorization")) {
        if (h->n_authorization == 0) h->authorization = value;
        h->n_authorization++;
    } else if (!strcasecmp(name, "Content-Type")) {
        if (!h->content_type) h->content_type = value;
    }
}

/* Constant time in the token's length: every byte of the token is looked at
 * whatever the header holds. */
static int token_ok(const char *authorization, const char *token)
{
    if (!authorization || strncmp(authorization, "Bearer ", 7) != 0) return 0;
    const char *h = authorization + 7;
    size_t a = strlen(h), b = strlen(token);
    unsigned char diff = (unsigned char)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)(h[i < a ? i : 0] ^ token[i]);
    return diff == 0;
}

static void verdict(mr__serve_verdict *out, int status, const char *msg, int close)
{
    out->status = status;
    out->msg = msg;
    out->close = close;
}

void mr__serve_check_head(const mr__serve_head *h, const char *method, const char *url, const char *token,
                          size_t max_body, mr__serve_verdict *out)
{
    memset(out, 0, sizeof(*out));
    if (!method) method = "";
    if (!url) url = "";
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    out->ep = !strcmp(url, "/healthz")      ? MR__EP_HEALTHZ
              : !strcmp(url, "/readyz")     ? MR__EP_READYZ
              : !strcmp(url, "/metrics")    ? MR__EP_METRICS
              : !strcmp(url, "/v1/model")   ? MR__EP_MODEL
              : !strcmp(url, "/v1/drift")   ? MR__EP_DRIFT
              : !strcmp(url, "/v1/features") ? MR__EP_FEATURES
              : !strcmp(url, "/v1/predict") ? MR__EP_PREDICT
                                            : mr__proto_route(url, &out->target);
    /* Framing (RFC 9112 section 6). A request whose length two parties
     * could read differently is refused and its connection closed: that is
     * what request smuggling behind a proxy lives on. */
    if (h->content_length_bad && h->n_content_length > 1)
        return verdict(out, 400, "conflicting Content-Length headers", 1);
    if (h->content_length_bad) return verdict(out, 400, "Content-Length is not a decimal number", 1);
    if (h->n_transfer_encoding && h->n_content_length)
        return verdict(out, 400, "both Transfer-Encoding and Content-Length", 1);
    if (h->n_transfer_encoding > 1) return verdict(out, 400, "more than one Transfer-Encoding header", 1);
    if (h->n_transfer_encoding && !h->te_chunked) {
        if (h->te_chunked_last) return verdict(out, 501, "only the chunked transfer coding is supported", 1);
        return verdict(out, 400, "Transfer-Encoding must end with chunked", 1);
    }
    out->body_len = h->n_transfer_encoding ? MR__BODY_CHUNKED : h->n_content_length ? h->content_length : 0;
    if (out->ep == MR__EP_HEALTHZ) return;
    if (token) {
        if (h->n_authorization > 1) return verdict(out, 400, "more than one Authorization header", 1);
        if (!token_ok(h->authorization, token)) return verdict(out, 401, "missing or wrong bearer token", 0);
    }
    switch (out->ep) {
    case MR__EP_NONE:
        return verdict(out, 404,
                       "no such endpoint (try /v1/predict, /v1/model, /healthz, /readyz, /metrics, /invocations, /v2)", 0);
    case MR__EP_METRICS:
    case MR__EP_MODEL:
    case MR__EP_DRIFT:
    case MR__EP_FEATURES:
    case MR__EP_PING:
    case MR__EP_VERSION:
    case MR__EP_V2_LIVE:
    case MR__EP_V2_READY:
    case MR__EP_V2_SERVER:
    case MR__EP_V2_MODEL:
    case MR__EP_V2_MODEL_READY:
        if (!get) verdict(out, 405, "use GET", 0);
        return;
    case MR__EP_PREDICT:
    case MR__EP_INVOCATIONS:
    case MR__EP_V2_INFER:
        if (!post) return verdict(out, 405, "use POST", 0);
        if (out->body_len != MR__BODY_CHUNKED && out->body_len > max_body)
            return verdict(out, 413, "request body too large", 0);
        if (out->ep == MR__EP_INVOCATIONS) {
            const char *msg = NULL;
            int st = mr__proto_content_type(h->content_type, &out->csv, &msg);
            if (st) return verdict(out, st, msg, 0);
        }
        return;
    default:
        return;
    }
}

/* ---- the memory a body will take --------------------------------------------------
 *
 * A predict body is parsed into a jansson tree, which is far larger than
 * its text: measured with jansson 2.14 and glibc (each allocation costing
 * its usable size plus an 8-byte header), an array element costs 8-16
 * bytes of slot (the array doubles), a number 40, a string 80 plus its
 * bytes, an empty object 230, an empty array 130, null/true/false nothing
 * (shared singletons), an object member about 95 plus its key; while it
 * parses, the lexer holds the current token's text in one buffer that
 * doubles (a new block, then the old one freed) and is kept for the
 * whole parse. A body of
 * `{}`s takes 79 times its size; ordinary rows 15-20 times. The server
 * bounds the memory of requests in flight by this estimate, so it must
 * never be low: each price below is above its measurement, and a string
 * is priced at its text length (escapes only shrink it). */
#define COST_OBJECT 320 /* '{': the object and its first hashtable */
#define COST_ARRAY 192  /* '[': the array and its first table */
#define COST_MEMBER 128 /* ':': pair, bucket, hashtable growth (the key is priced as a string) */
#define COST_SLOT 32    /* ',': an array slot, with doubling and the copy during a realloc */
#define COST_STRING 112 /* a string value or key, plus its length */
#define COST_TOKEN 64   /* a number or literal */
#define COST_BASE 256   /* the parser's own state and error text */

size_t mr__serve_json_cost(const char *text, size_t len)
{
    size_t cost = COST_BASE + COST_SLOT, i = 0; /* the first element of the outermost array */
    size_t tok_start = 0, longest = 0;
    int in_token = 0;
    while (i < len) {
        unsigned char c = (unsigned char)text[i];
        if (c == '"') {
            size_t j = i + 1;
            while (j < len && text[j] != '"') j += text[j] == '\\' ? 2 : 1;
            cost += COST_STRING + (j - i) + COST_SLOT;
            if (j - i > longest) longest = j - i;
            i = j + 1;
            in_token = 0;
            continue;
        }
        int tok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
                  c == '+' || c == '-' || c >= 0x80;
        if (tok && !in_token) {
            cost += COST_TOKEN + COST_SLOT;
            tok_start = i;
        }
        if (tok && i + 1 - tok_start > longest) longest = i + 1 - tok_start;
        in_token = tok;
        if (c == '{') cost += COST_OBJECT;
        else if (c == '[') cost += COST_ARRAY;
        else if (c == ':') cost += COST_MEMBER;
        else if (c == ',') cost += COST_SLOT;
        i++;
    }
    /* the lexer saves a token's text (a string's with both quotes, so
     * up to longest + 1 bytes) in a buffer that starts at 16 bytes and
     * doubles when full: the doubling that made it B bytes happened at
     * B/2 saved bytes, and while it copies, the old B/2 and the new B
     * blocks are both alive, with a 16-byte chunk header each. So its
     * peak is 3 * (longest + 1) + 32; twice the longest token, the price
     * here before, was low by up to half of it (found by fuzz_http). */
    return cost + 3 * (longest + 1) + 32;
}

/* ---- parsing and shape --------------------------------------------------------------- */

/* Appends s as a JSON string literal; bytes that are not UTF-8 become
 * U+FFFD and control characters \u escapes. */
static void json_strn_utf8(mr_buf *b, const char *s, size_t len)
{
    mr_buf_puts(b, "\"");
    const unsigned char *p = (const unsigned char *)s, *end = p + len;
    while (p < end) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            mr_buf_append(b, "\\", 1);
            mr_buf_append(b, p, 1);
            p++;
        } else if (c == '\n' || c == '\r' || c == '\t') {
            mr_buf_puts(b, c == '\n' ? "\\n" : c == '\r' ? "\\r" : "\\t");
            p++;
        } else if (c < 0x20 || c == 0x7f) {
            mr_buf_printf(b, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            mr_buf_append(b, p, 1);
            p++;
        } else {
            /* the length of a well-formed sequence starting here, or 0 */
            size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
            if (n > (size_t)(end - p)) n = 0;
            for (size_t k = 1; k < n; k++)
                if ((p[k] & 0xc0) != 0x80) n = 0;
            if (n == 3 && ((c == 0xe0 && p[1] < 0xa0) || (c == 0xed && p[1] > 0x9f))) n = 0; /* overlong, surrogate */
            if (n == 4 && ((c == 0xf0 && p[1] < 0x90) || (c == 0xf4 && p[1] > 0x8f))) n = 0; /* overlong, > U+10FFFF */
            if (n) {
                mr_buf_append(b, p, n);
                p += n;
            } else {
                mr_buf_puts(b, "\\ufffd");
                p++;
            }
        }
    }
    mr_buf_puts(b, "\"");
}

static void json_str_utf8(mr_buf *b, const char *s) { json_strn_utf8(b, s, strlen(s)); }

void mr__serve_json_str(mr_buf *out, const char *s) { json_str_utf8(out, s); }
void mr__serve_json_strn(mr_buf *out, const char *s, size_t len) { json_strn_utf8(out, s, len); }

void mr__serve_error_json(mr_buf *out, const char *msg, const char *field, long row)
{
    mr_buf_puts(out, "{\"error\": ");
    json_str_utf8(out, msg);
    if (field) {
        mr_buf_puts(out, ", \"field\": ");
        json_str_utf8(out, field);
    }
    if (row >= 0) mr_buf_printf(out, ", \"row\": %ld", row);
    mr_buf_puts(out, "}");
}

/* Shape check: rows = array of objects; columns = object of equal-length arrays. */
static const char *shape_of(json_t *doc, size_t max_rows, size_t *n_rows, int *columnar, int *too_many)
{
    *too_many = 0;
    if (!json_is_object(doc)) return "the body must be a JSON object with \"rows\" or \"columns\"";
    json_t *rows = json_object_get(doc, "rows"), *cols = json_object_get(doc, "columns");
    if (rows) {
        if (!json_is_array(rows)) return "\"rows\" must be an array of objects";
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r) if (!json_is_object(r)) return "\"rows\" must be an array of objects";
        *n_rows = json_array_size(rows);
        *columnar = 0;
    } else if (cols) {
        if (!json_is_object(cols)) return "\"columns\" must be an object of arrays";
        const char *key;
        json_t *v;
        size_t n = SIZE_MAX;
        json_object_foreach(cols, key, v)
        {
            if (!json_is_array(v)) return "\"columns\" must be an object of arrays";
            if (n != SIZE_MAX && json_array_size(v) != n) return "every column must have the same length";
            n = json_array_size(v);
        }
        *n_rows = n == SIZE_MAX ? 0 : n;
        *columnar = 1;
    } else {
        return "the body must have \"rows\" or \"columns\"";
    }
    if (*n_rows > max_rows) {
        *too_many = 1;
        return "too many rows in one request";
    }
    return NULL;
}

int mr__serve_parse_body(const char *body, size_t len, size_t max_rows, mr__serve_req *req, mr_buf *err_body)
{
    memset(req, 0, sizeof(*req));
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *doc = json_loadb(body ? body : "", body ? len : 0, 0, &je);
    if (mr_alloc_failures_here() != oom0) { /* the server's fault, not the request's: 500, as any other */
        json_decref(doc);
        mr_buf_puts(err_body, "{\"error\": \"out of memory\"}");
        return 500;
    }
    if (!doc) {
        char msg[400];
        snprintf(msg, sizeof(msg), "malformed JSON at line %d, column %d (byte %d): %s", je.line, je.column,
                 je.position, je.text);
        mr_buf_puts(err_body, "{\"error\": ");
        json_str_utf8(err_body, msg);
        mr_buf_printf(err_body, ", \"line\": %d, \"column\": %d, \"position\": %d}", je.line, je.column, je.position);
        return 400;
    }
    int too_many = 0;
    const char *bad = shape_of(doc, max_rows, &req->n_rows, &req->columnar, &too_many);
    if (bad) {
        json_decref(doc);
        mr__serve_error_json(err_body, bad, NULL, -1);
        return too_many ? 413 : 400;
    }
    req->doc = doc;
    return 0;
}

void mr__serve_req_clear(mr__serve_req *req)
{
    json_decref(req->doc);
    req->doc = NULL;
    json_decref(req->reply);
    req->reply = NULL;
    mr_free(req->pos);
    req->pos = NULL;
}

/* ---- fitting rows and scoring ----------------------------------------------------------- */

/* The value of input i (`name`) in row r, or NULL if absent. */
const json_t *mr__serve_req_value(const mr__serve_req *q, size_t i, const char *name, size_t r)
{
    if (q->pos) return q->pos[i] < 0 ? NULL : json_array_get(json_array_get(q->doc, r), (size_t)q->pos[i]);
    if (q->columnar) return json_array_get(json_object_get(json_object_get(q->doc, "columns"), name), r);
    return json_object_get(json_array_get(json_object_get(q->doc, "rows"), r), name);
}

static int set_error(mr__serve_job *j, int status, const char *msg, const char *field, long row)
{
    j->status = status;
    j->body.len = 0;
    if (j->req.proto) j->status = mr__proto_error_json(&j->body, j->req.proto, status, msg);
    else mr__serve_error_json(&j->body, msg, field, row);
    return -1;
}

/* A JSON value as the cell mr_bundle_coerce_value takes (NULL: absent).
 * Strings are borrowed from the document. */
static const mr_cell *json_cell(const json_t *v, mr_cell *c)
{
    if (!v) return NULL;
    memset(c, 0, sizeof(*c));
    switch (json_typeof(v)) {
    case JSON_NULL: c->kind = MR_CELL_NULL; break;
    case JSON_TRUE:
    case JSON_FALSE:
        c->kind = MR_CELL_BOOL;
        c->i = json_is_true(v);
        break;
    case JSON_INTEGER:
        c->kind = MR_CELL_INT;
        c->i = (int64_t)json_integer_value(v);
        break;
    case JSON_REAL:
        c->kind = MR_CELL_NUM;
        c->num = json_real_value(v);
        break;
    case JSON_STRING:
        c->kind = MR_CELL_STR;
        c->str = json_string_value(v);
        c->len = json_string_length(v);
        break;
    default:
        c->kind = MR_CELL_OTHER;
        c->str = json_is_array(v) ? "an array" : "an object";
        c->len = strlen(c->str);
        break;
    }
    return c;
}

/* dry: only checks. Otherwise appends the job's rows to cols (one per input,
 * of mr_bundle_input_column_type). The rules and messages are the bundle's
 * (mr_bundle_coerce_value): a bad value is a 422 naming field and row. */
static int job_fill(mr__serve_job *j, const mr_bundle *b, mr_column **cols, int dry, const mr__serve_features *fs,
                    const mr_cell *looked)
{
    size_t n_in = mr_bundle_n_inputs(b);
    size_t nf = fs && looked ? mr_bundle_service_of(b)->n_features : 0;
    for (size_t r = 0; r < j->req.n_rows; r++) {
        for (size_t i = 0; i < n_in; i++) {
            mr_cell cell;
            mr_bundle_bad bad;
            int32_t k = looked ? mr__features_of_input(fs, i) : -1;
            const mr_cell *v = k >= 0 ? &looked[r * nf + (size_t)k]
                                      : json_cell(mr__serve_req_value(&j->req, i, mr_bundle_input_at(b, i)->name, r), &cell);
            if (!v && j->req.absent_null) {
                memset(&cell, 0, sizeof(cell));
                cell.kind = MR_CELL_NULL;
                v = &cell;
            }
            mr_status st = mr_bundle_coerce_value(b, i, v, j->req.text, dry ? NULL : cols[i], &bad);
            if (st == MR_E_PARSE) {
                char msg[512];
                bad.row = r;
                mr_bundle_bad_format(&bad, msg, sizeof(msg));
                return set_error(j, 422, msg, bad.column, (long)r);
            }
            if (st != MR_OK) return set_error(j, 500, "out of memory", NULL, -1);
        }
    }
    return 0;
}

static void fmt_double(mr_buf *b, double v)
{
    if (isnan(v) || isinf(v)) mr_buf_puts(b, "null");
    else mr_buf_printf(b, "%.17g", v);
}

void mr__serve_json_double(mr_buf *out, double v) { fmt_double(out, v); }

/* ---- the scoring table, kept per thread ---------------------------------------
 * A batch's rows are fitted into one table of the bundle's inputs. Building it
 * (a column per input, its name, the table's name index) cost more than
 * scoring a row of a model of 250 inputs; each scoring thread keeps its table
 * for the bundle version it last scored, emptied between batches. */
typedef struct scratch {
    char version[MR_HASH_HEX_LEN + 1];
    mr_table *t;
} scratch;

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_ok;

static void scratch_free(void *p)
{
    scratch *sc = p;
    if (!sc) return;
    mr_table_free(sc->t);
    mr_free(sc);
}

static void scratch_init(void) { scratch_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

/* The calling thread's empty table of b's inputs (its columns in schema order), or NULL on OOM. */
static mr_table *scratch_table(const mr_bundle *b, mr_error *err)
{
    pthread_once(&scratch_once, scratch_init);
    scratch *sc = scratch_ok ? pthread_getspecific(scratch_key) : NULL;
    const char *ver = mr_bundle_version_id(b);
    size_t n_in = mr_bundle_n_inputs(b);
    if (sc && sc->t && !strcmp(sc->version, ver) && sc->t->n_cols == n_in) {
        for (size_t i = 0; i < n_in; i++) mr_column_clear(sc->t->cols[i]);
        sc->t->n_rows = 0;
        return sc->t;
    }
    if (!sc && scratch_ok && (sc = mr_calloc(1, sizeof(*sc))) != NULL && pthread_setspecific(scratch_key, sc) != 0) {
        mr_free(sc);
        sc = NULL;
    }
    if (sc) {
        mr_table_free(sc->t);
        sc->t = NULL;
    }
    mr_table *t = NULL;
    mr_status rc = mr_table_new(&t, err);
    for (size_t i = 0; rc == MR_OK && i < n_in; i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        mr_column *c = NULL;
        rc = mr_column_new(in->name, mr_bundle_input_column_type(in), 64, &c, err);
        if (rc == MR_OK) rc = mr_table_add_column(t, c, err);
    }
    if (rc != MR_OK) {
        mr_table_free(t);
        return NULL;
    }
    if (sc) {
        sc->t = t;
        snprintf(sc->version, sizeof(sc->version), "%s", ver);
    }
    return t;
}

/* Done with t: kept for the next batch, unless it is not the thread's (no
 * thread storage), it holds a batch too large to keep, or it is half-filled
 * (an allocation failed). */
static void scratch_done(mr_table *t, int keep)
{
    scratch *sc = scratch_ok ? pthread_getspecific(scratch_key) : NULL;
    int mine = sc && sc->t == t;
    if (mine && keep && (t->n_cols == 0 || t->cols[0]->cap <= 4096)) return;
    if (mine) sc->t = NULL;
    mr_table_free(t);
}

void mr__serve_score(mr__serve_job *const *jobs, size_t n_jobs, const mr_bundle *b, const char *version, int threads,
                     size_t *rows_out)
{
    mr__serve_score_observed(jobs, n_jobs, b, version, threads, NULL, 0, NULL, rows_out);
}

void mr__serve_score_observed(mr__serve_job *const *jobs, size_t n_jobs, const mr_bundle *b, const char *version,
                              int threads, mr__serve_monitor *mon, int strict, mr__serve_features *fs,
                              size_t *rows_out)
{
    size_t rows = 0;
    mr_error err;
    mr_error_init(&err);
    mr_table *t = scratch_table(b, &err); /* its columns are filled in place */
    mr_column **cols = t ? t->cols : NULL;
    /* the store, held until the answers are written: looked[q] borrows its strings */
    mr__features_snap *snap = fs ? mr__features_acquire(fs) : NULL;
    mr_cell **looked = fs ? mr_calloc(n_jobs ? n_jobs : 1, sizeof(*looked)) : NULL;
    uint8_t *include = fs ? mr_calloc(n_jobs ? n_jobs : 1, 1) : NULL;
    int ok = t != NULL;
    mr__features_batch *fb = fs ? mr__features_batch_new(fs, snap) : NULL;
    size_t *first = fs ? mr_calloc(n_jobs ? n_jobs : 1, sizeof(*first)) : NULL;
    if (fs && (!looked || !include || !fb || !first)) ok = 0;
    /* by entity: every /v1/predict job's rows looked up in one pass (a bad request fails alone) */
    for (size_t q = 0; ok && fs && q < n_jobs; q++) {
        mr__serve_job *j = jobs[q];
        j->status = 0;
        if (j->req.proto) continue;
        char msg[512];
        const char *field = NULL;
        long row = -1;
        int inc = 0;
        int st = mr__features_batch_add(fb, &j->req, &first[q], &inc, msg, sizeof(msg), &field, &row);
        if (st) set_error(j, st, msg, field, row);
        include[q] = (uint8_t)inc;
    }
    if (ok && fs) {
        char msg[512];
        int st = mr__features_batch_run(fb, msg, sizeof(msg));
        for (size_t q = 0; st && q < n_jobs; q++)
            if (!jobs[q]->status && !jobs[q]->req.proto) set_error(jobs[q], st, msg, NULL, -1);
    }
    for (size_t q = 0; ok && q < n_jobs; q++) {
        mr__serve_job *j = jobs[q];
        if (!fs) j->status = 0;
        if (j->status) continue;
        if (fs && !j->req.proto) {
            char msg[512];
            const char *field = NULL;
            long row = -1;
            int st = mr__features_batch_cells(fb, first[q], j->req.n_rows, &looked[q], msg, sizeof(msg), &field, &row);
            if (st) {
                set_error(j, st, msg, field, row);
                continue;
            }
        }
        if (job_fill(j, b, cols, 1, fs, looked ? looked[q] : NULL) != 0) continue;
        if (mon) { /* the values fit: what were they? */
            char why[256];
            const char *field = NULL;
            long row = -1;
            if (mr__monitor_rows(mon, &j->req, why, sizeof(why), &field, &row) && strict) {
                set_error(j, 422, why, field, row);
                continue;
            }
        }
        if (job_fill(j, b, cols, 0, fs, looked ? looked[q] : NULL) != 0) { /* OOM half-way: columns are inconsistent */
            ok = 0;
            break;
        }
        rows += j->req.n_rows;
    }
    int filled = ok; /* the columns hold whole rows only (an allocation failure half-way leaves them ragged) */
    double *pred = NULL;
    size_t k = 0;
    if (ok && rows) {
        t->n_rows = rows;
        ok = mr_bundle_predict_table(b, t, 0, threads, &pred, &k, &err) == MR_OK;
    }
    size_t at = 0;
    for (size_t q = 0; q < n_jobs; q++) {
        mr__serve_job *j = jobs[q];
        if (j->status) continue;
        if (!ok) {
            set_error(j, 500, err.msg[0] ? err.msg : "prediction failed", NULL, -1);
            continue;
        }
        j->status = 200;
        j->body.len = 0;
        if (j->req.proto) { /* a protocol's answer, from the same predictions */
            mr__proto_answer(&j->body, &j->req, b, version, pred ? pred + at * k : NULL, k);
            at += j->req.n_rows;
            continue;
        }
        mr_buf_puts(&j->body, "{\"model_version\": ");
        json_str_utf8(&j->body, version);
        mr_buf_puts(&j->body, ", \"predictions\": [");
        for (size_t r = 0; r < j->req.n_rows; r++, at++) {
            if (r) mr_buf_puts(&j->body, ", ");
            if (k == 1) fmt_double(&j->body, pred[at]);
            else {
                mr_buf_puts(&j->body, "[");
                for (size_t c = 0; c < k; c++) {
                    if (c) mr_buf_puts(&j->body, ", ");
                    fmt_double(&j->body, pred[at * k + c]);
                }
                mr_buf_puts(&j->body, "]");
            }
        }
        mr_buf_puts(&j->body, "]");
        if (include && include[q]) {
            mr_buf_puts(&j->body, ", \"features\": ");
            mr__features_rows_json(fs, looked[q], j->req.n_rows, &j->body);
        }
        mr_buf_puts(&j->body, "}");
    }
    for (size_t q = 0; looked && q < n_jobs; q++) mr_free(looked[q]);
    mr_free(looked);
    mr_free(include);
    mr_free(first);
    mr__features_batch_free(fb);
    if (fs) mr__features_release(fs, snap);
    mr_free(pred);
    if (t) scratch_done(t, filled);
    *rows_out = rows;
}
