/* The model server's request handling that needs no socket (request.c):
 * the checks made when a request's headers arrive, before any body byte is
 * read; the memory estimate, JSON parse and shape check of a predict body;
 * fitting rows to the bundle's inputs, scoring a batch and writing the
 * answers. The MLflow and Open Inference protocols (protocol.c): their
 * paths, their bodies turned into the request /v1/predict's parse makes,
 * and their answers. server.c drives these from libmicrohttpd's callbacks,
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
    const char *content_type;  /* the first Content-Type (borrowed), NULL if none */
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
    MR__EP_INVOCATIONS,    /* POST /invocations (MLflow) */
    MR__EP_PING,           /* GET /ping, /health (MLflow) */
    MR__EP_VERSION,        /* GET /version (MLflow) */
    MR__EP_V2_LIVE,        /* GET /v2/health/live (Open Inference Protocol) */
    MR__EP_V2_READY,       /* GET /v2/health/ready */
    MR__EP_V2_SERVER,      /* GET /v2 */
    MR__EP_V2_MODEL,       /* GET /v2/models/NAME[/versions/V] */
    MR__EP_V2_MODEL_READY, /* GET /v2/models/NAME[/versions/V]/ready */
    MR__EP_V2_INFER,       /* POST /v2/models/NAME[/versions/V]/infer */
    MR__EP_DRIFT,          /* GET /v1/drift (monitor.c) */
    MR__EP_FEATURES,       /* GET /v1/features?KEY=... (features.c) */
    MR__EP_COUNT           /* not an endpoint: the number of the above */
} mr__serve_endpoint;

/* The model and version a /v2/models/... path names: views into the URL
 * (not NUL-terminated); version NULL when the path has no /versions/V. */
typedef struct mr__proto_target {
    const char *model;
    size_t model_len;
    const char *version;
    size_t version_len;
} mr__proto_target;

#define MR__BODY_CHUNKED UINT64_MAX /* mr__serve_verdict.body_len of a chunked body */

/* The decision on a request whose headers are in and whose body is not. */
typedef struct mr__serve_verdict {
    int status;              /* 0: go on with ep; else answer this status now, without reading the body */
    const char *msg;         /* status != 0: the error message (static) */
    int close;               /* the framing cannot be trusted: close the connection after answering */
    mr__serve_endpoint ep;   /* the endpoint (also when status != 0, where known) */
    uint64_t body_len;       /* bytes of body announced: Content-Length, 0, or MR__BODY_CHUNKED */
    mr__proto_target target; /* the /v2/models/NAME[/versions/V]/... endpoints: NAME and V */
    int csv;                 /* /invocations: the body is text/csv */
} mr__serve_verdict;

/* Checks, in this order: framing (two Content-Length values that differ,
 * Transfer-Encoding together with Content-Length, more than one
 * Transfer-Encoding, a coding other than chunked: 400, or 501 when chunked
 * is last; all with close set, RFC 9112 section 6); /healthz (no token);
 * the bearer token when token != NULL (401; constant-time compare; two
 * Authorization headers are a 400); the path (404) and the method (405);
 * for /v1/predict, /invocations and /v2/.../infer, a Content-Length over
 * max_body (413); for /invocations a Content-Type other than JSON or CSV
 * (415, mr__proto_content_type). Never fails. */
void mr__serve_check_head(const mr__serve_head *h, const char *method, const char *url, const char *token,
                          size_t max_body, mr__serve_verdict *out);

/* ---- predict bodies --------------------------------------------------------- */

/* An upper bound of the bytes jansson allocates to parse text[0, len) (or
 * to fail on it): a linear scan that prices every structural character,
 * string and bare token (the constants are in request.c, measured against
 * jansson 2.14 with glibc's allocator, each with room to spare;
 * tests/fuzz/fuzz_http.c checks the bound on every input). */
size_t mr__serve_json_cost(const char *text, size_t len);

/* How a request's answer is written: /v1/predict's, or a protocol's. */
typedef enum mr__proto { MR__PROTO_NATIVE = 0, MR__PROTO_MLFLOW, MR__PROTO_OIP } mr__proto;

typedef struct mr__serve_req {
    json_t *doc;    /* the parsed body (owned) */
    size_t n_rows;
    int columnar;   /* 1: {"columns": {name: [...]}}; 0: {"rows": [{...}]} */
    int32_t *pos;   /* non-NULL: doc is a list of rows that are lists, input i at pos[i] of each (-1: absent);
                       owned. The protocols' rows of values (MLflow's dataframe_split, rows in schema order)
                       are read where they are, not gathered into columns first */
    /* 0 for a /v1/predict body; set by the protocols (mr__proto_parse): */
    int text;        /* string values are text the bundle's rules parse (a CSV body, read as `millrace predict`
                        reads a CSV file) */
    int absent_null; /* a row without an input reads it as null, not missing (MLflow's records, as pandas
                        builds a frame from them) */
    mr__proto proto; /* the answer's shape and its errors' (set_error, mr__proto_answer) */
    json_t *reply;   /* what the answer echoes (OIP: model name, id, outputs asked for); owned, or NULL */
} mr__serve_req;

/* Parses and shape-checks a predict body. Returns 0 with req filled (free
 * with mr__serve_req_clear), or the HTTP status with the JSON error written
 * to err_body: 400 (malformed JSON, with line, column and position; not an
 * object with "rows" or "columns"; rows that are not objects; ragged
 * columns), 413 (more than max_rows rows), 500 (out of memory). */
int mr__serve_parse_body(const char *body, size_t len, size_t max_rows, mr__serve_req *req, mr_buf *err_body);
void mr__serve_req_clear(mr__serve_req *req); /* frees the doc and the reply; safe twice */

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
 * numbers with 17 significant digits (null for NaN and infinities); a
 * protocol's request its protocol's answer (mr__proto_answer) and errors
 * (mr__proto_error_json). Sets *rows_out to the rows scored. Call from one
 * thread at a time (the pool). */
void mr__serve_score(mr__serve_job *const *jobs, size_t n, const mr_bundle *b, const char *version, int threads,
                     size_t *rows_out);

/* Appends {"error": msg[, "field": field][, "row": row]} (row < 0: none).
 * Bytes of msg that are not UTF-8 become U+FFFD, so the body is valid JSON
 * whatever input the message quotes. */
void mr__serve_error_json(mr_buf *out, const char *msg, const char *field, long row);
/* Appends s as a JSON string (bytes that are not UTF-8 as U+FFFD), and v
 * as the answers write numbers (%.17g; null for NaN and infinities). */
void mr__serve_json_str(mr_buf *out, const char *s);
void mr__serve_json_double(mr_buf *out, double v);
void mr__serve_json_strn(mr_buf *out, const char *s, size_t len); /* s[0, len), as mr__serve_json_str */

/* ---- the MLflow and Open Inference protocols (protocol.c) --------------------
 *
 * Socket-free, as the rest of this header: a protocol's body becomes the
 * mr__serve_req a /v1/predict body's parse makes (the rows or columns of a
 * JSON document, scored by mr__serve_score through the same fitting and
 * the same mr_bundle_predict_table), and its scored rows the protocol's
 * answer. docs/serve.md lists the forms each protocol takes. */

/* The endpoint of a path that is not one of /v1's (MR__EP_NONE if none);
 * t gets the model and version of a /v2/models/... path. */
mr__serve_endpoint mr__proto_route(const char *url, mr__proto_target *t);
mr__proto mr__proto_of(mr__serve_endpoint ep);
int mr__serve_endpoint_has_body(mr__serve_endpoint ep); /* POST /v1/predict, /invocations, /v2/.../infer */
const char *mr__serve_endpoint_label(mr__serve_endpoint ep); /* "/v1/predict", ..., "other" (static) */

/* /invocations: MLflow's Content-Type rule. Returns 0 and sets *csv (a
 * missing header is JSON), or 415 with *msg (static): a media type other
 * than application/json or text/csv, a charset other than UTF-8, another
 * parameter. */
int mr__proto_content_type(const char *content_type, int *csv, const char **msg);

/* What one protocol request is parsed against. */
typedef struct mr__proto_call {
    mr__serve_endpoint ep;  /* MR__EP_INVOCATIONS or MR__EP_V2_INFER */
    int csv;                /* /invocations: a text/csv body */
    const mr_bundle *b;     /* the schema (positional rows, unknown inputs, a CSV's columns); borrowed */
    const char *model_name; /* OIP: echoed as the answer's model_name */
    size_t max_rows;        /* more rows: 413 */
} mr__proto_call;

/* An upper bound of the bytes parsing text[0, len) for pc takes until the
 * request is answered: its JSON parse, the document rebuilt for
 * mr__serve_score (at most once more its parse, plus one column per input
 * of pc->b), or for a CSV body the reader's table and its strings. */
size_t mr__proto_cost(const mr__proto_call *pc, const char *text, size_t len);

/* Parses and shape-checks a protocol body into req (free with
 * mr__serve_req_clear). Returns 0, or the HTTP status with the protocol's
 * error written to err_body: 400 (malformed JSON or CSV, a form the
 * protocol does not have, a shape, datatype or value count that does not
 * fit, an input the bundle does not have, MLflow records that all lack a
 * required input), 413 (more than pc->max_rows rows), 415 (a CSV body on a
 * system without memfd_create), 500 (out of memory). */
int mr__proto_parse(const mr__proto_call *pc, const char *body, size_t len, mr__serve_req *req, mr_buf *err_body);

/* Appends protocol p's error body for an error of `status` (the statuses of
 * serve_int.h; 422, a value that does not fit, is the 400 both protocols
 * use) and returns the status to answer: native {"error": msg}; MLflow
 * {"error_code": "BAD_REQUEST" | "INVALID_PARAMETER_VALUE" | ..., "message":
 * msg}; OIP {"error": msg}. */
int mr__proto_error_json(mr_buf *out, mr__proto p, int status, const char *msg);

/* Appends req's answer: pred holds req->n_rows * k doubles, row-major, k =
 * mr_bundle_n_outputs(b) (NULL when there are no rows). MLflow
 * {"predictions": [p, ...]} (k > 1: one array per row); OIP {"model_name",
 * "model_version": version, "id" (if the request had one), "outputs": one
 * FP64 tensor of shape [N] per output of b, those asked for if any}. */
void mr__proto_answer(mr_buf *out, const mr__serve_req *req, const mr_bundle *b, const char *version,
                      const double *pred, size_t k);

#define MR__MODEL_NAME_MAX 128
/* The name /v2/models/NAME serves b under: its manifest's "name" when that
 * is 1..128 bytes of [A-Za-z0-9._-], else "model". Returns 0, or -1 (out of
 * memory: out is "model", do not keep it). out holds MR__MODEL_NAME_MAX+1. */
int mr__proto_model_name(const mr_bundle *b, char *out);
/* Whether t names model `name` (and, if it has a version, `version`). */
int mr__proto_target_matches(const mr__proto_target *t, const char *name, const char *version);
/* The OIP metadata documents: server, model (inputs from b's schema),
 * readiness (name NULL: the server's). */
void mr__proto_v2_server_json(mr_buf *out);
void mr__proto_v2_model_json(mr_buf *out, const mr_bundle *b, const char *name, const char *version);
void mr__proto_v2_ready_json(mr_buf *out, const char *name, int ready);


/* ---- features looked up by entity (features.c) -----------------------------------
 *
 * A bundle with a feature service (mr_bundle_service_of) is served from the
 * online store it names: a /v1/predict row carries the entity keys (and the
 * inputs the store does not hold), and each of the store's features is read
 * for it as of the request's "as_of" (default: now), under the bundle's
 * missing policy. docs/featurestore.md, "Serving by entity". */
typedef struct mr__serve_features mr__serve_features;
typedef struct mr__features_snap mr__features_snap; /* one open store, held by a batch */

/* For b's service: *out NULL when b has none. paths[0, n_paths): the
 * stores in the service's order (n_paths 0: the ones the bundle names).
 * Opens each store and checks its keys and features (names and types)
 * against the service: MR_E_SCHEMA naming the difference, MR_E_INVALID_ARG
 * (no path, or not one per store), the stores' open errors. b must outlive it. */
mr_status mr__features_open(const mr_bundle *b, const char *const *paths, size_t n_paths, mr__serve_features **out,
                            mr_error *err);
void mr__features_free(mr__serve_features *fs); /* NULL is a no-op; no snapshot may be held */
int32_t mr__features_of_input(const mr__serve_features *fs, size_t i); /* input i's service feature, or -1 */

/* The stores as they are now (each reopened first when a new file was
 * renamed into its place, or a Redis store changed its layout, and the new
 * one fits the service; one that does not is warned about once and the old
 * one keeps serving). Values looked up borrow them until
 * mr__features_release. NULL on OOM. Thread-safe. */
mr__features_snap *mr__features_acquire(mr__serve_features *fs);
void mr__features_release(mr__serve_features *fs, mr__features_snap *sn); /* NULL is a no-op */

/* The features of a batch's /v1/predict rows, looked up in one pass over
 * the store (one round trip to Redis), in three steps: each request added
 * (its as_of, include_features and entity keys checked), one run, then each
 * request's cells. */
typedef struct mr__features_batch mr__features_batch;
mr__features_batch *mr__features_batch_new(mr__serve_features *fs, mr__features_snap *sn); /* NULL on OOM */
void mr__features_batch_free(mr__features_batch *fb);                                       /* NULL is a no-op */
/* Adds q's rows (*first_row: where they start). Returns 0, or the status for
 * q alone with msg, *field and *row (-1: none): 400 (a bad "as_of" or
 * "include_features"; a row that sends a feature the store holds), 422 (a
 * missing entity key, or one that does not parse as its type), 500. */
int mr__features_batch_add(mr__features_batch *fb, const mr__serve_req *q, size_t *first_row, int *include, char *msg,
                           size_t cap, const char **field, long *row);
/* Looks every added row up. 0, or 500 with msg (the store failed). */
int mr__features_batch_run(mr__features_batch *fb, char *msg, size_t cap);
/* The cells of rows [first_row, first_row + n_rows): n_rows * n_features,
 * row-major in service order (the value used, or the feature's default),
 * strings borrowed from the batch. 0, or 422 under "missing": "reject"
 * (an entity without a live value; msg, field, row), or 500. */
int mr__features_batch_cells(const mr__features_batch *fb, size_t first_row, size_t n_rows, mr_cell **cells_out,
                             char *msg, size_t cap, const char **field, long *row);
/* The looked-up values of n_rows rows as a JSON list of {feature: value} objects. */
void mr__features_rows_json(const mr__serve_features *fs, const mr_cell *cells, size_t n_rows, mr_buf *out);
/* GET /v1/features: for each store whose entity keys the request names
 * (arg(ctx, KEY); ?entity= for a lone store of one key), every feature it
 * holds for that entity, as of arg(ctx, "as_of") (NULL: now):
 * {"found": bool (in every store asked), "features": {...}}. Returns 0, or
 * 400 (no store's keys named, a key or time that does not parse) or 500
 * with msg. */
int mr__features_vector_json(mr__serve_features *fs, const char *(*arg)(void *ctx, const char *name), void *ctx,
                             mr_buf *out, char *msg, size_t cap);

/* ---- what the inputs were (monitor.c) ----------------------------------------- */

/* A row's value of input i (named name) in a parsed request (NULL when absent). */
const json_t *mr__serve_req_value(const mr__serve_req *q, size_t i, const char *name, size_t r);

/* The counters and drift of one bundle's inputs (docs/serve.md, "What a
 * served model tells about itself"). Thread-safe. NULL on OOM. */
typedef struct mr__serve_monitor mr__serve_monitor;
mr__serve_monitor *mr__monitor_new(const mr_bundle *b);
void mr__monitor_free(mr__serve_monitor *m); /* NULL is a no-op */
/* Observes a request's rows (values that fit: the scorer calls it after
 * fitting): counts extra fields and, with the bundle's profile, unseen
 * categories, values out of the training range and floats for integer
 * columns, and keeps each value's bin for drift. Returns the events; the
 * first one is described in why (may be NULL), its field and row. */
size_t mr__monitor_rows(mr__serve_monitor *m, const mr__serve_req *q, char *why, size_t why_len, const char **field,
                        long *row_out);
/* Prometheus lines (the counters and millrace_input_psi), and /v1/drift's JSON. */
void mr__monitor_metrics(mr__serve_monitor *m, mr_buf *out);
void mr__monitor_drift_json(mr__serve_monitor *m, const char *version, mr_buf *out);
/* mr__serve_score, with each fitting job's rows observed by mon (NULL:
 * none); strict: a job with a lenient input gets a 422 naming its field
 * and row instead of its predictions. */
/* fs (NULL: none): b's feature service; /v1/predict rows get their features from it (mr__features_batch_*),
 * and a request with "include_features": true gets them back as "features". */
void mr__serve_score_observed(mr__serve_job *const *jobs, size_t n_jobs, const mr_bundle *b, const char *version,
                              int threads, mr__serve_monitor *mon, int strict, mr__serve_features *fs,
                              size_t *rows_out);

#endif
