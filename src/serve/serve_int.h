/* The model server's request handling that needs no socket (request.c):
 * the checks made when a request's headers arrive, before any body byte is
 * read; the memory estimate, JSON parse and shape check of a predict body;
 * fitting rows to the bundle's inputs, scoring a batch and writing the
 * answers. server.c drives these from libmicrohttpd's callbacks,
 * tests/fuzz/fuzz_http.c from a buffer. Internal to src/serve. */
#ifndef MILLRACE_SERVE_INT_H
#define MILLRACE_SERVE_INT_H

#include "millrace/bundle.h"
#include "millrace/core.h"

#include <jansson.h>
#include <stdint.h>

/* ---- headers ------------------------------------------------------------- */

/* What the framing and credential headers of one request say, gathered one
 * header at a time (mr__serve_head_add) in the order they came. Values are
 * as libmicrohttpd hands them over: leading blanks stripped, nothing else. */
typedef struct mr__serve_head {
    int n_content_length;    /* Content-Length headers seen */
    int content_length_bad;  /* one is not a decimal number, or two disagree */
    uint64_t content_length; /* the first one's value */
    int n_transfer_encoding; /* Transfer-Encoding headers seen */
    int te_chunked;          /* the first is exactly "chunked" (any case), as libmicrohttpd reads it */
    int te_chunked_last;     /* its last coding is chunked (so a 501, not a 400, for the others) */
    int n_authorization;
    const char *authorization; /* the first one (borrowed from the caller) */
} mr__serve_head;

void mr__serve_head_init(mr__serve_head *h);
/* name and value are NUL-terminated and borrowed until the verdict is made. */
void mr__serve_head_add(mr__serve_head *h, const char *name, const char *value);

typedef enum mr__serve_endpoint {
    MR__EP_NONE = 0,
    MR__EP_HEALTHZ,
    MR__EP_READYZ,
    MR__EP_METRICS,
    MR__EP_MODEL,
    MR__EP_PREDICT,
} mr__serve_endpoint;

#define MR__BODY_CHUNKED UINT64_MAX /* mr__serve_verdict.body_len of a chunked body */

/* The decision on a request whose headers are in and whose body is not. */
typedef struct mr__serve_verdict {
    int status;              /* 0: go on with ep; else answer this status now, without reading the body */
    const char *msg;         /* status != 0: the error message (static) */
    int close;               /* the framing cannot be trusted: close the connection after answering */
    mr__serve_endpoint ep;   /* the endpoint (also when status != 0, where known) */
    uint64_t body_len;       /* bytes of body announced: Content-Length, 0, or MR__BODY_CHUNKED */
} mr__serve_verdict;

/* Checks, in this order: framing (two Content-Length values that differ,
 * Transfer-Encoding together with Content-Length, more than one
 * Transfer-Encoding, a coding other than chunked: 400, or 501 when chunked
 * is last; all with close set, RFC 9112 section 6); /healthz (no token);
 * the bearer token when token != NULL (401; constant-time compare; two
 * Authorization headers are a 400); the path (404) and the method (405);
 * for /v1/predict, a Content-Length over max_body (413). Never fails. */
void mr__serve_check_head(const mr__serve_head *h, const char *method, const char *url, const char *token,
                          size_t max_body, mr__serve_verdict *out);

/* ---- predict bodies --------------------------------------------------------- */

/* An upper bound of the bytes jansson allocates to parse text[0, len) (or
 * to fail on it): a linear scan that prices every structural character,
 * string and bare token (the constants are in request.c, measured against
 * jansson 2.14 with glibc's allocator, each with room to spare;
 * tests/fuzz/fuzz_http.c checks the bound on every input). */
size_t mr__serve_json_cost(const char *text, size_t len);

typedef struct mr__serve_req {
    json_t *doc;    /* the parsed body (owned) */
    size_t n_rows;
    int columnar;   /* 1: {"columns": {name: [...]}}; 0: {"rows": [{...}]} */
} mr__serve_req;

/* Parses and shape-checks a predict body. Returns 0 with req filled (free
 * with mr__serve_req_clear), or the HTTP status with the JSON error written
 * to err_body: 400 (malformed JSON, with line, column and position; not an
 * object with "rows" or "columns"; rows that are not objects; ragged
 * columns), 413 (more than max_rows rows), 500 (out of memory). */
int mr__serve_parse_body(const char *body, size_t len, size_t max_rows, mr__serve_req *req, mr_buf *err_body);
void mr__serve_req_clear(mr__serve_req *req); /* frees the doc; safe twice */

/* One request of a batch: its parsed body and, once scored, its answer. */
typedef struct mr__serve_job {
    mr__serve_req req;
    int status;  /* 0 until scored; then 200, 422 or 500 */
    mr_buf body; /* the answer's JSON (owned) */
} mr__serve_job;

/* Scores jobs[0, n) against b in one table: each job's rows are fitted to
 * b's inputs (a value that does not fit gives that job alone a 422 naming
 * field and row), the good rows go through mr_bundle_predict_table once
 * (on `threads` pool threads), and each job gets its status and body:
 * {"model_version": version, "predictions": [...]} in its rows' order,
 * numbers with 17 significant digits (null for NaN and infinities). Sets
 * *rows_out to the rows scored. Call from one thread at a time (the pool). */
void mr__serve_score(mr__serve_job *const *jobs, size_t n, const mr_bundle *b, const char *version, int threads,
                     size_t *rows_out);

/* Appends {"error": msg[, "field": field][, "row": row]} (row < 0: none).
 * Bytes of msg that are not UTF-8 become U+FFFD, so the body is valid JSON
 * whatever input the message quotes. */
void mr__serve_error_json(mr_buf *out, const char *msg, const char *field, long row);

#endif
