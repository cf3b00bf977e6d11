/* The model server: HTTP/1.1 (libmicrohttpd, keep-alive) in front of one
 * batcher thread that owns prediction. Requests are parsed on connection
 * threads, queued, gathered into micro-batches bounded by rows and delay,
 * scored with mr_bundle_predict_table (the path `millrace predict` uses), and
 * answered in order. A reload swaps the bundle between batches, so no
 * request fails during the swap. Beside /v1/predict it speaks MLflow's
 * scoring protocol (/invocations) and the Open Inference Protocol (/v2),
 * scored the same way. Also a small keep-alive load generator for
 * `millrace bench-serve`. docs/serve.md has the endpoints and the essay.
 *
 * Example:
 *
 *   mr_server_opts o;
 *   mr_server_opts_init(&o);
 *   o.bundle_path = "model.mrb";
 *   mr_server *s;
 *   if (mr_server_start(&o, &s, &err) != MR_OK) {   // binds 127.0.0.1 by default
 *       mr_log_error(&err);   // "cannot listen on 127.0.0.1:8080: port 8080 is already in use"
 *       return;
 *   }
 *   printf("port %d, model %s\n", mr_server_port(s), mr_server_model_version(s));
 *   // ... serve until told to stop ...
 *   if (mr_server_reload(s, &err) != MR_OK) mr_log_error(&err);   // re-reads o.bundle_path; the old one keeps serving
 *   mr_server_stop(s);                  // drains the queue, then stops
 *
 * Ownership: a server is the caller's until mr_server_stop, which frees it;
 * it copies the paths, host and token of its options. A load generator's
 * options are read during the run; its result is caller storage.
 * Status codes: MR_E_INVALID_ARG (no bundle, a bad host, port or limit),
 * MR_E_IO (cannot bind: the message names host and port; the daemon did
 * not start), MR_E_INTERNAL (a thread or epoll could not start), the
 * bundle's load errors (MR_E_NOT_FOUND, MR_E_CORRUPT, ...), MR_E_NOMEM.
 * Thread safety: start/reload/stop from one controlling thread; the server
 * runs its own connection and batcher threads. mr_loadgen_run runs on the
 * calling thread. */
#ifndef MILLRACE_SERVE_H
#define MILLRACE_SERVE_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_server_opts {
    const char *bundle_path;  /* required; re-read by mr_server_reload */
    const char *host;         /* IPv4 or IPv6 literal ("::1", "[::1]"), or "localhost"; default "127.0.0.1" */
    int port;                 /* 0 = any free port (see mr_server_port) */
    size_t max_batch;         /* rows per micro-batch; default 256; 1 = no batching */
    unsigned max_delay_us;    /* how long the first request of a batch may wait for company; default 200 */
    size_t max_body;          /* request body bytes (413 beyond); default 1 MiB */
    size_t max_queue;         /* queued requests (503 + Retry-After beyond); default 1024 */
    size_t max_rows;          /* rows in one request (413 beyond); default 10000 */
    unsigned max_connections; /* default 512 (2..65536); idle connections may hold three quarters of them:
                                 one more closes the oldest idle connection */
    const char *token;        /* bearer token required on every endpoint but /healthz; NULL = none */
    int threads;              /* prediction threads for large batches; 0 = pool size */
    unsigned http_threads;    /* event-loop threads serving connections; 0 = one per core, at most 4 */
    size_t max_inflight_bytes; /* memory all requests in flight may hold: a body's text from its headers
                                  on, then its parsed JSON (an upper bound) until it is answered; 503 +
                                  Retry-After beyond; default 64 MiB; at least max_body */
    unsigned idle_timeout_s;  /* a connection that has not sent a request's headers this long after it
                                 opened or got its last answer is closed; also the inactivity timeout
                                 while answering; default 30 */
    unsigned request_timeout_s; /* from a request's headers to its last body byte; slower is closed;
                                   default 30 */
    int strict;               /* 1: a request with a lenient input (an unseen category, a value out of the
                                 training range, a float for an integer column: the bundle's profile; a
                                 field that is no input) is a 422 naming it, not scored */
    int constant_response;    /* 1: /v1/predict (and the protocols' scoring endpoints) read each body whole
                                 and answer one fixed 200 response
                                 without parsing or predicting, through the same connections, threads
                                 and replies: the floor of the design, what bench/serve divides by
                                 (vs_floor); never for serving models */
    const char *const *store_paths; /* the online stores of a bundle with a feature service, one per store it
                                       names, in its order; none (n_store_paths 0): the ones it recorded
                                       (docs/featurestore.md, "Serving by entity") */
    size_t n_store_paths;
} mr_server_opts;
void mr_server_opts_init(mr_server_opts *o); /* the defaults above */

typedef struct mr_server mr_server;

/* Loads the bundle, starts the batcher, the connection reaper and the HTTP
 * daemon. Errors: bundle load errors, MR_E_INVALID_ARG (bad host, port or
 * limits: an option out of range), MR_E_IO (cannot bind), MR_E_INTERNAL (a
 * thread did not start), MR_E_NOMEM. */
mr_status mr_server_start(const mr_server_opts *o, mr_server **out, mr_error *err);
int mr_server_port(const mr_server *s); /* the bound port (the chosen one for port 0) */
/* Loads opts.bundle_path again and swaps it in between two batches. On
 * failure the old bundle keeps serving; errors as mr_bundle_load. */
mr_status mr_server_reload(mr_server *s, mr_error *err);
/* The same with another file (a registry alias that moved): on success the
 * server serves path and later reloads re-read it; on failure nothing
 * changes. NULL path = mr_server_reload. */
mr_status mr_server_reload_path(mr_server *s, const char *path, mr_error *err);
const char *mr_server_model_version(const mr_server *s); /* copy it: valid until the next reload */
/* Stops taking requests (503), answers everything queued, stops the daemon
 * and frees s. NULL is a no-op. */
void mr_server_stop(mr_server *s);

/* ---- load generator ----------------------------------------------------- */
typedef struct mr_loadgen_opts {
    const char *host;       /* IPv4 or IPv6 literal ("::1", "[::1]") or "localhost"; default 127.0.0.1 */
    int port;
    const char *path;       /* default /v1/predict */
    const char *body;       /* request body (POSTed as JSON) */
    const char *token;      /* bearer token or NULL */
    double qps;             /* target rate over all connections; 0 = closed loop (as fast as possible) */
    double duration_s;      /* how long to send */
    int connections;        /* keep-alive connections (1..1024), all driven by the calling thread; default 8 */
    uint64_t max_requests;  /* hard cap on requests sent; 0 = qps*duration*1.1+16 or 10 million */
    double malformed_fraction; /* 0..1: share of requests sent malformed, in turn: truncated JSON, no
                                  "rows", rows that are not objects (400), an unknown path (404), GET on
                                  path (405), two Content-Lengths that differ (400); meant for /v1/predict */
    double slow_fraction;   /* 0..1: share sent slowly: the head, a pause, half the body, a pause, the rest */
    double slow_pause_s;    /* the two pauses together (each at least half of it); 0..4; default 0.5 */
} mr_loadgen_opts;
void mr_loadgen_opts_init(mr_loadgen_opts *o); /* the defaults above */

typedef struct mr_loadgen_result {
    uint64_t sent, ok, non_2xx, errors; /* sent = ok + non_2xx + errors; errors: connect/write failures,
                                           connections closed mid-response, malformed responses, timeouts */
    double elapsed_s, achieved_qps;
    double p50_ms, p90_ms, p99_ms, max_ms; /* percentiles over up to 4 million samples (uniform beyond); max exact;
                                              over the requests sent whole and well-formed only */
    uint64_t malformed_sent, malformed_4xx; /* malformed requests sent; those answered 4xx */
    uint64_t slow_sent, slow_ok;            /* slow requests sent; those answered 2xx */
} mr_loadgen_result;
/* Runs the load on the calling thread (one epoll loop for all connections)
 * and returns when it is done: at most duration + 5 s after it starts.
 * Failed requests are counted in out, not returned: MR_E_INVALID_ARG (bad
 * options), MR_E_INTERNAL (epoll), MR_E_NOMEM. */
mr_status mr_loadgen_run(const mr_loadgen_opts *o, mr_loadgen_result *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
