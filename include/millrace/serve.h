/* The model server: HTTP/1.1 (libmicrohttpd, keep-alive) in front of one
 * batcher thread that owns prediction. Requests are parsed on connection
 * threads, queued, gathered into micro-batches bounded by rows and delay,
 * scored with mr_bundle_predict_table (the path `millrace predict` uses), and
 * answered in order. A reload swaps the bundle between batches, so no
 * request fails during the swap. Also a small keep-alive load generator for
 * `millrace bench-serve`. docs/serve.md has the endpoints and the essay.
 *
 *   mr_server_opts o;
 *   mr_server_opts_init(&o);
 *   o.bundle_path = "model.mrb";
 *   mr_server *s;
 *   mr_server_start(&o, &s, &err);      // binds 127.0.0.1 by default
 *   printf("port %d\n", mr_server_port(s));
 *   ...
 *   mr_server_reload(s, &err);          // re-reads o.bundle_path
 *   mr_server_stop(s);                  // drains the queue, then stops
 *
 * Thread safety: start/reload/stop from one controlling thread. */
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
    unsigned max_connections; /* default 512 */
    const char *token;        /* bearer token required on every endpoint but /healthz; NULL = none */
    int threads;              /* prediction threads for large batches; 0 = pool size */
    unsigned http_threads;    /* event-loop threads serving connections; 0 = one per core, at most 4 */
} mr_server_opts;
void mr_server_opts_init(mr_server_opts *o);

typedef struct mr_server mr_server;

/* Loads the bundle, starts the batcher and the HTTP daemon. Errors:
 * bundle load errors, MR_E_INVALID_ARG (bad host), MR_E_IO (cannot bind). */
mr_status mr_server_start(const mr_server_opts *o, mr_server **out, mr_error *err);
int mr_server_port(const mr_server *s);
/* Loads opts.bundle_path again and swaps it in between two batches. On
 * failure the old bundle keeps serving. */
mr_status mr_server_reload(mr_server *s, mr_error *err);
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
} mr_loadgen_opts;
void mr_loadgen_opts_init(mr_loadgen_opts *o);

typedef struct mr_loadgen_result {
    uint64_t sent, ok, non_2xx, errors; /* sent = ok + non_2xx + errors; errors: connect/write failures,
                                           connections closed mid-response, malformed responses, timeouts */
    double elapsed_s, achieved_qps;
    double p50_ms, p90_ms, p99_ms, max_ms; /* percentiles over up to 4 million samples (uniform beyond); max exact */
} mr_loadgen_result;
/* Runs the load on the calling thread (one epoll loop for all connections)
 * and returns when it is done: at most duration + 5 s after it starts. */
mr_status mr_loadgen_run(const mr_loadgen_opts *o, mr_loadgen_result *out, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
