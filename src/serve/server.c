/* The HTTP model server (include/millrace/serve.h, docs/serve.md). What it
 * does with a request that needs no socket (header checks, body parsing,
 * scoring) is in request.c; this file is libmicrohttpd, the queue, the
 * batcher, connection bookkeeping and the server's lifecycle.
 *
 * Micro-batching. libmicrohttpd runs a small pool of event-loop threads
 * (epoll), each serving many keep-alive connections. The request handler
 * reads the body (capped), parses the JSON, checks its shape, suspends the
 * connection and puts a job on the queue; it never blocks, so a pool thread
 * goes on serving other connections while the job waits. One batcher
 * thread owns prediction: it sleeps until the queue is
 * non-empty, takes the first job, and keeps taking jobs while the batch has
 * fewer than max_batch rows and the first job has waited less than
 * max_delay_us (a timed wait, never a spin). It then validates each job
 * against the current bundle's input schema (a bad job gets its own 422
 * without touching the others), builds one columnar table of all good rows,
 * calls mr_bundle_predict_table once, marks every job done and resumes its
 * connection; libmicrohttpd then calls the handler again on that
 * connection's pool thread, which sends the answer. Under light load
 * a request waits at most max_delay_us for company; under heavy load
 * batches fill up and the per-row cost of the tree walk and of the
 * features pass is shared, which is where the throughput gain comes from.
 *
 * Reload. The bundle pointer is read by the batcher under the queue lock at
 * the start of each batch. A reload loads the new file outside the lock,
 * then swaps the pointer and moves the old bundle to a retired list; the
 * batcher frees retired bundles at the start of its next batch, when it no
 * longer uses them (nor an inline request, nor a protocol request whose
 * parse reads the schema: those pin the bundle they read). Queued requests
 * are never dropped, so a swap fails no request.
 *
 * Protocols. /invocations (MLflow) and /v2/models/NAME/infer (Open
 * Inference Protocol) go the way of /v1/predict, with its limits, token,
 * queue, batches and metrics: protocol.c turns their body into the same
 * request (reading the bundle's schema, for rows given in schema order)
 * and their scored rows into their answer; here only their paths, their
 * metadata GETs and the model name in a /v2 path (a 404 from the headers)
 * differ.
 *
 * What a client can hold. Everything a client costs the server is bounded
 * before it is spent:
 *   - Nothing is read from a body before its headers pass: the handler's
 *     first call (headers in, no body byte consumed) checks framing, token,
 *     path and method (mr__serve_check_head) and answers 400/401/404/405/413
 *     there; libmicrohttpd then discards the body unread and closes.
 *   - Memory: every request in flight holds a reservation from one budget
 *     (max_inflight_bytes): its Content-Length when the headers arrive (a
 *     chunked body reserves as it grows), then, before the JSON is parsed,
 *     the bytes jansson will take for it (mr__serve_json_cost, an upper
 *     bound: a parsed body is 15-80 times its text), which it keeps until
 *     its answer is sent. A reservation that does not fit is a 503 +
 *     Retry-After; one larger than the whole budget a 413.
 *   - Time: a connection must deliver a request's headers within
 *     idle_timeout_s of opening or of its previous answer, and the rest of
 *     the request within request_timeout_s of its headers; libmicrohttpd's
 *     own inactivity timeout (idle_timeout_s) covers a client that stops
 *     reading its answer. A reaper thread closes the late ones.
 *   - Slots: each connection has a slot (libmicrohttpd's socket context)
 *     on one of two lists, in the order it got there: idle (no request, or
 *     a request whose headers are not complete) and reading (headers in,
 *     body coming). Idle connections may hold at most three quarters of
 *     max_connections: a connection that opens when they hold that many
 *     closes the oldest idle one. The last quarter is always left to
 *     connections that have sent their headers, so idle or slow-loris
 *     connections cannot starve a client that means business.
 * Closing is shutdown(2) on the socket, under the lock that the slot's
 * removal (NOTIFY_CLOSED, before libmicrohttpd closes the descriptor) also
 * takes, so the descriptor is never one that was already reused;
 * libmicrohttpd sees end-of-file and closes the connection itself.
 *
 * Half-closed clients. A client may shutdown(SHUT_WR) after its request.
 * libmicrohttpd 0.9.75 resumes a suspended connection by marking it
 * readable and, if the connection's last event-loop state was "read",
 * reads from it first; that read returns end-of-file, and the connection
 * is closed as failed with the queued answer never sent (16 concurrent
 * half-closing clients lost 86% of their answers). The state is not
 * updated while a connection is suspended, and suspending in the same pass
 * that read the request leaves it at "read". So the handler's first final
 * call queues the job but does not suspend: it returns without an answer,
 * the state becomes "block" (the request is complete, the application
 * owes the answer), and libmicrohttpd calls the handler again at once on
 * its next loop turn. That call answers if the batcher has finished the
 * job meanwhile (no suspension, no resume) and suspends otherwise; a
 * resumed connection in "block" is not read; it is answered. The job's
 * suspended/done flags (under mu) say which: the batcher resumes only a
 * suspended connection. Between the two calls the connection is live, so
 * it may end (a reset) while its job is queued or being scored:
 * on_completed then takes a queued job off the queue, or leaves a job the
 * batcher holds to the batcher (orphan), which frees it. */
#include "serve_int.h"
#include "millrace/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <jansson.h>
#include <microhttpd.h>

#define N_LAT_BUCKETS 14
static const double lat_bounds[N_LAT_BUCKETS] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                 0.025,  0.05,    0.1,    0.25,  0.5,   1.0,  2.5};
#define N_BATCH_BUCKETS 10
static const double batch_bounds[N_BATCH_BUCKETS] = {1, 2, 4, 8, 16, 32, 64, 128, 256, 1024};
#define N_CODES 11
static const int codes[N_CODES] = {200, 400, 401, 404, 405, 413, 415, 422, 500, 501, 503};

typedef struct job {
    mr__serve_job base; /* first member: the batcher's array holds &base */
    double t_enq;       /* mr_now() at enqueue */
    int done;           /* set by the batcher (under mu) when it is scored */
    int taken;          /* in the batcher's current batch (under mu) */
    int suspended;      /* its connection is suspended: the batcher resumes it (under mu) */
    int orphan;         /* its connection ended before done: the batcher frees it (under mu) */
    struct MHD_Connection *mc;
    struct job *next;
} job;

typedef struct retired {
    mr_bundle *b;
    mr__serve_monitor *mon; /* its inputs' counters and drift */
    mr__serve_features *fs; /* its online store, or NULL */
    struct retired *next;
} retired;

/* Where a connection is (see "What a client can hold"). */
enum { SLOT_NEW, SLOT_IDLE, SLOT_READING, SLOT_BUSY, SLOT_CUT };

/* One TCP connection, from libmicrohttpd's accept to its close. */
typedef struct slot {
    int fd;
    int where;       /* SLOT_*; on the idle or reading list when SLOT_IDLE / SLOT_READING */
    double since;    /* mr_now() when it got there */
    int woken;       /* cut_gone shut its read side since it got there */
    struct slot *prev, *next;
} slot;

typedef struct slot_list {
    slot *head, *tail; /* head: the oldest */
    size_t n;
} slot_list;

struct mr_server {
    mr_server_opts o;
    char *bundle_path, *host, *token;
    struct MHD_Daemon *d;
    int port;
    pthread_t batcher;
    int batcher_started;
    pthread_mutex_t mu;
    pthread_cond_t work_cv;
    job *head, *tail;
    size_t queued;
    size_t inflight;   /* jobs created and not yet finished by on_completed (under mu) */
    pthread_cond_t idle_cv; /* signalled when inflight drops to 0 */
    int stopping;
    int busy;          /* the batcher holds a batch (from its first job to its answers; under mu) */
    int inline_n;      /* requests being scored in their connection's thread (under mu) */
    int pinned;        /* protocol requests reading the bundle's schema while they parse (under mu) */
    unsigned http_threads; /* the pool's event-loop threads: in-place scoring needs another one free */
    mr_bundle *cur;
    mr__serve_monitor *mon; /* s->cur's inputs: counters and drift (monitor.c) */
    mr__serve_features *fs; /* s->cur's online store (features.c); NULL: no feature service */
    char **store_paths;     /* --store, one per store of the service (or none) */
    size_t n_store_paths;
    retired *old;      /* bundles replaced by a reload: freed once neither the batcher nor an inline or
                          parsing request can be using one (busy == 0, inline_n == 0, pinned == 0) */
    mr__serve_job **batch; /* the batcher's array of jobs (max_batch, at most 4096) */
    char version[MR_HASH_HEX_LEN + 1];
    char model_name[MR__MODEL_NAME_MAX + 1];    /* /v2/models/NAME (mr__proto_model_name; under mu) */
    char model_name_of[MR_HASH_HEX_LEN + 1];    /* the version whose name it is ("" until computed) */
    uint64_t reloads;
    /* connections (under conn_mu) */
    pthread_mutex_t conn_mu;
    pthread_cond_t reaper_cv;
    slot_list idle, reading;
    size_t idle_cap;    /* idle connections beyond this close the oldest idle one */
    int reaper_stop;
    pthread_t reaper;
    int reaper_started;
    uint64_t evicted, timeouts_idle, timeouts_request;
    /* memory held by requests in flight (see the top) */
    atomic_size_t held;
    /* metrics (under stats_mu) */
    pthread_mutex_t stats_mu;
    uint64_t by_code[N_CODES + 1]; /* last: other */
    uint64_t by_endpoint[MR__EP_COUNT]; /* MR__EP_NONE: unknown paths */
    uint64_t lat_count[N_LAT_BUCKETS + 1];
    double lat_sum;
    uint64_t batch_count[N_BATCH_BUCKETS + 1];
    double batch_sum;
    uint64_t batches;
};

/* One request (libmicrohttpd's per-request context). */
typedef struct conn {
    mr_buf body;
    double t0;        /* mr_now() when the headers were in */
    int chunked;      /* the body's length is not announced */
    int too_large;    /* a chunked body over max_body: read on, keep nothing, 413 */
    int over_budget;  /* a chunked body past the memory budget: read on, keep nothing, 503 */
    size_t reserved;  /* bytes of the budget this request holds */
    mr__serve_endpoint ep; /* from the headers (mr__serve_check_head): the answer's shape, the metrics */
    int csv;          /* /invocations: a text/csv body */
    slot *sl;         /* its connection's slot; NULL if untracked */
    job *job;         /* the queued or answered prediction of this request */
} conn;

void mr_server_opts_init(mr_server_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->max_batch = 256;
    o->max_delay_us = 200;
    o->max_body = (size_t)1 << 20;
    o->max_queue = 1024;
    o->max_rows = 10000;
    o->max_connections = 512;
    o->max_inflight_bytes = (size_t)64 << 20;
    o->idle_timeout_s = 30;
    o->request_timeout_s = 30;
}

/* ---- metrics ---------------------------------------------------------------- */

static void record(mr_server *s, mr__serve_endpoint ep, int status, double secs)
{
    pthread_mutex_lock(&s->stats_mu);
    s->by_endpoint[ep < MR__EP_COUNT ? ep : MR__EP_NONE]++;
    size_t c = N_CODES;
    for (size_t k = 0; k < N_CODES; k++)
        if (codes[k] == status) c = k;
    s->by_code[c]++;
    size_t b = N_LAT_BUCKETS;
    for (size_t k = 0; k < N_LAT_BUCKETS; k++)
        if (secs <= lat_bounds[k]) {
            b = k;
            break;
        }
    s->lat_count[b]++;
    s->lat_sum += secs;
    pthread_mutex_unlock(&s->stats_mu);
}

static void record_batch(mr_server *s, size_t rows)
{
    pthread_mutex_lock(&s->stats_mu);
    size_t b = N_BATCH_BUCKETS;
    for (size_t k = 0; k < N_BATCH_BUCKETS; k++)
        if ((double)rows <= batch_bounds[k]) {
            b = k;
            break;
        }
    s->batch_count[b]++;
    s->batch_sum += (double)rows;
    s->batches++;
    pthread_mutex_unlock(&s->stats_mu);
}

static void metrics_text(mr_server *s, mr_buf *out)
{
    pthread_mutex_lock(&s->mu);
    size_t depth = s->queued;
    char version[MR_HASH_HEX_LEN + 1];
    memcpy(version, s->version, sizeof(version));
    uint64_t reloads = s->reloads;
    pthread_mutex_unlock(&s->mu);
    pthread_mutex_lock(&s->stats_mu);
    mr_buf_puts(out, "# HELP millrace_requests_total HTTP requests answered, by status code.\n"
                     "# TYPE millrace_requests_total counter\n");
    for (size_t k = 0; k <= N_CODES; k++) {
        if (k < N_CODES) mr_buf_printf(out, "millrace_requests_total{code=\"%d\"} %llu\n", codes[k], (unsigned long long)s->by_code[k]);
        else mr_buf_printf(out, "millrace_requests_total{code=\"other\"} %llu\n", (unsigned long long)s->by_code[k]);
    }
    mr_buf_puts(out, "# HELP millrace_endpoint_requests_total HTTP requests answered, by endpoint (its path; "
                     "\"other\": paths the server does not have).\n"
                     "# TYPE millrace_endpoint_requests_total counter\n");
    for (size_t e = 0; e < MR__EP_COUNT; e++)
        mr_buf_printf(out, "millrace_endpoint_requests_total{endpoint=\"%s\"} %llu\n",
                      mr__serve_endpoint_label((mr__serve_endpoint)e), (unsigned long long)s->by_endpoint[e]);
    mr_buf_puts(out, "# HELP millrace_request_duration_seconds Time from request arrival to response.\n"
                     "# TYPE millrace_request_duration_seconds histogram\n");
    uint64_t cum = 0;
    for (size_t k = 0; k < N_LAT_BUCKETS; k++) {
        cum += s->lat_count[k];
        mr_buf_printf(out, "millrace_request_duration_seconds_bucket{le=\"%g\"} %llu\n", lat_bounds[k], (unsigned long long)cum);
    }
    cum += s->lat_count[N_LAT_BUCKETS];
    mr_buf_printf(out, "millrace_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    mr_buf_printf(out, "millrace_request_duration_seconds_sum %.9g\nmillrace_request_duration_seconds_count %llu\n",
                  s->lat_sum, (unsigned long long)cum);
    mr_buf_puts(out, "# HELP millrace_batch_size Rows per micro-batch.\n# TYPE millrace_batch_size histogram\n");
    cum = 0;
    for (size_t k = 0; k < N_BATCH_BUCKETS; k++) {
        cum += s->batch_count[k];
        mr_buf_printf(out, "millrace_batch_size_bucket{le=\"%g\"} %llu\n", batch_bounds[k], (unsigned long long)cum);
    }
    cum += s->batch_count[N_BATCH_BUCKETS];
    mr_buf_printf(out, "millrace_batch_size_bucket{le=\"+Inf\"} %llu\n", (unsigned long long)cum);
    mr_buf_printf(out, "millrace_batch_size_sum %.9g\nmillrace_batch_size_count %llu\n", s->batch_sum,
                  (unsigned long long)cum);
    pthread_mutex_unlock(&s->stats_mu);
    mr_buf_printf(out, "# HELP millrace_queue_depth Requests waiting for the batcher.\n# TYPE millrace_queue_depth gauge\n"
                       "millrace_queue_depth %zu\n", depth);
    mr_buf_printf(out, "# HELP millrace_model_info The bundle being served (version = xxh3-128 of the file).\n"
                       "# TYPE millrace_model_info gauge\nmillrace_model_info{version=\"%s\"} 1\n", version);
    mr_buf_printf(out, "# HELP millrace_model_reloads_total Successful bundle reloads.\n"
                       "# TYPE millrace_model_reloads_total counter\nmillrace_model_reloads_total %llu\n",
                  (unsigned long long)reloads);
    pthread_mutex_lock(&s->conn_mu);
    size_t n_idle = s->idle.n, n_reading = s->reading.n;
    uint64_t evicted = s->evicted, t_idle = s->timeouts_idle, t_req = s->timeouts_request;
    pthread_mutex_unlock(&s->conn_mu);
    mr_buf_printf(out, "# HELP millrace_connections Open connections: idle (no complete request headers), reading (a body).\n"
                       "# TYPE millrace_connections gauge\nmillrace_connections{state=\"idle\"} %zu\n"
                       "millrace_connections{state=\"reading\"} %zu\n", n_idle, n_reading);
    mr_buf_printf(out, "# HELP millrace_connections_closed_total Connections the server closed: the oldest idle one "
                       "when idle ones held their share, or past a timeout.\n"
                       "# TYPE millrace_connections_closed_total counter\n"
                       "millrace_connections_closed_total{reason=\"evicted\"} %llu\n"
                       "millrace_connections_closed_total{reason=\"idle_timeout\"} %llu\n"
                       "millrace_connections_closed_total{reason=\"request_timeout\"} %llu\n",
                  (unsigned long long)evicted, (unsigned long long)t_idle, (unsigned long long)t_req);
    mr_buf_printf(out, "# HELP millrace_inflight_bytes Memory reserved by requests in flight (body text, then its parse).\n"
                       "# TYPE millrace_inflight_bytes gauge\nmillrace_inflight_bytes %zu\n"
                       "# HELP millrace_inflight_bytes_limit --max-inflight-bytes.\n"
                       "# TYPE millrace_inflight_bytes_limit gauge\nmillrace_inflight_bytes_limit %zu\n",
                  atomic_load(&s->held), s->o.max_inflight_bytes);
    pthread_mutex_lock(&s->mu); /* the inputs' counters and drift: the monitor is pinned meanwhile */
    mr__serve_monitor *mon = s->mon;
    s->pinned++;
    pthread_mutex_unlock(&s->mu);
    mr__monitor_metrics(mon, out);
    pthread_mutex_lock(&s->mu);
    if (--s->pinned == 0 && s->old) pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
}

static double now_plus_ts(double at, struct timespec *ts)
{
    struct timespec cur;
    clock_gettime(CLOCK_MONOTONIC, &cur);
    double wait = at - mr_now();
    if (wait < 0) wait = 0;
    long ns = cur.tv_nsec + (long)(wait * 1e9);
    ts->tv_sec = cur.tv_sec + ns / 1000000000L;
    ts->tv_nsec = ns % 1000000000L;
    return wait;
}

/* Frees a job that is off the queue and that nobody else holds (under mu). */
static void job_free_locked(mr_server *s, job *j)
{
    mr__serve_req_clear(&j->base.req);
    mr_buf_free(&j->base.body);
    mr_free(j);
    if (--s->inflight == 0) pthread_cond_broadcast(&s->idle_cv);
}

static void *batcher_main(void *arg)
{
    mr_server *s = arg;
#ifdef __linux__
    prctl(PR_SET_NAME, "mr-batcher", 0, 0, 0); /* shows in top -H and perf */
#endif
    size_t cap = s->o.max_batch < 4096 ? s->o.max_batch : 4096;
    mr__serve_job **batch = s->batch; /* allocated by mr_server_start, so the batcher cannot fail to start */
    char version[MR_HASH_HEX_LEN + 1];
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping && !(s->old && !s->inline_n && !s->pinned))
            pthread_cond_wait(&s->work_cv, &s->mu);
        while (s->old && !s->inline_n && !s->pinned) { /* not in use: the previous batch is finished, no inline
                                                         scoring, no parse reading a schema */
            retired *r = s->old;
            s->old = r->next;
            mr__features_free(r->fs);
            mr_bundle_free(r->b);
            mr__monitor_free(r->mon);
            mr_free(r);
        }
        if (!s->head) {
            if (s->stopping) break; /* stopping and drained */
            continue;               /* woken to free a retired bundle */
        }
        s->busy = 1;
        size_t n = 0, rows = 0;
        double deadline = s->head->t_enq + s->o.max_delay_us * 1e-6;
        for (;;) {
            if (s->head) {
                if (n > 0 && (rows + s->head->base.req.n_rows > s->o.max_batch || n >= cap)) break;
                job *j = s->head;
                s->head = j->next;
                if (!s->head) s->tail = NULL;
                s->queued--;
                j->taken = 1;
                batch[n++] = &j->base;
                rows += j->base.req.n_rows;
                if (rows >= s->o.max_batch) break;
                continue;
            }
            if (s->stopping || s->o.max_delay_us == 0 || mr_now() >= deadline) break;
            struct timespec ts;
            now_plus_ts(deadline, &ts);
            pthread_cond_timedwait(&s->work_cv, &s->mu, &ts);
        }
        const mr_bundle *b = s->cur;
        mr__serve_monitor *mon = s->mon;
        mr__serve_features *fs = s->fs;
        memcpy(version, s->version, sizeof(version));
        pthread_mutex_unlock(&s->mu);
        size_t scored = 0;
        mr__serve_score_observed(batch, n, b, version, rows >= 1024 ? s->o.threads : 1, mon, s->o.strict, fs, &scored);
        if (scored) record_batch(s, scored);
        pthread_mutex_lock(&s->mu);
        /* A job may be freed by its connection's thread as soon as mu is
         * released after done is set; an orphan is freed here. */
        for (size_t q = 0; q < n; q++) {
            job *j = (job *)batch[q]; /* base is the first member */
            if (j->orphan) {
                job_free_locked(s, j);
                continue;
            }
            j->done = 1;
            if (j->suspended) MHD_resume_connection(j->mc);
        }
        s->busy = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- connections: slots, the idle cap, the reaper ------------------------------- */

static void list_push(slot_list *l, slot *sl)
{
    sl->next = NULL;
    sl->prev = l->tail;
    if (l->tail) l->tail->next = sl;
    else l->head = sl;
    l->tail = sl;
    l->n++;
}

static void list_remove(slot_list *l, slot *sl)
{
    if (sl->prev) sl->prev->next = sl->next;
    else l->head = sl->next;
    if (sl->next) sl->next->prev = sl->prev;
    else l->tail = sl->prev;
    sl->prev = sl->next = NULL;
    l->n--;
}

/* Under conn_mu. Takes sl off its list. */
static void slot_unlist(mr_server *s, slot *sl)
{
    if (sl->where == SLOT_IDLE) list_remove(&s->idle, sl);
    else if (sl->where == SLOT_READING) list_remove(&s->reading, sl);
}

/* Under conn_mu. Moves sl to `where` (at the young end of its list). A
 * slot we have shut down stays so. */
static void slot_move(mr_server *s, slot *sl, int where)
{
    if (sl->where == SLOT_CUT) return;
    slot_unlist(s, sl);
    sl->where = where;
    sl->since = mr_now();
    sl->woken = 0;
    if (where == SLOT_IDLE) list_push(&s->idle, sl);
    else if (where == SLOT_READING) list_push(&s->reading, sl);
}

/* Under conn_mu. Shuts the connection down: libmicrohttpd reads
 * end-of-file and closes it. The descriptor is still the connection's:
 * NOTIFY_CLOSED, which comes before libmicrohttpd closes it, takes the
 * slot off under this lock. */
static void slot_cut(mr_server *s, slot *sl)
{
    slot_unlist(s, sl);
    sl->where = SLOT_CUT;
    (void)shutdown(sl->fd, SHUT_RDWR);
}

/* Moves the request's connection to `where`. Returns -1 if we shut it
 * down meanwhile (evicted or timed out): the caller drops the request. */
static int conn_to(mr_server *s, conn *cc, int where)
{
    if (!cc->sl) return 0;
    pthread_mutex_lock(&s->conn_mu);
    int cut = cc->sl->where == SLOT_CUT;
    slot_move(s, cc->sl, where);
    pthread_mutex_unlock(&s->conn_mu);
    return cut ? -1 : 0;
}

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    mr_server *s = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        /* Out of memory: the connection is not tracked; only libmicrohttpd's
         * inactivity timeout applies to it. */
        slot *sl = ci ? mr_calloc(1, sizeof(*sl)) : NULL;
        *socket_context = sl;
        if (!sl) return;
        sl->fd = ci->connect_fd;
        sl->where = SLOT_NEW;
        pthread_mutex_lock(&s->conn_mu);
        while (s->idle.n >= s->idle_cap && s->idle.head) {
            slot_cut(s, s->idle.head);
            s->evicted++;
        }
        slot_move(s, sl, SLOT_IDLE);
        pthread_mutex_unlock(&s->conn_mu);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        slot *sl = *socket_context;
        if (!sl) return;
        pthread_mutex_lock(&s->conn_mu);
        slot_unlist(s, sl);
        pthread_mutex_unlock(&s->conn_mu);
        mr_free(sl);
        *socket_context = NULL;
    }
}

/* Under conn_mu. Wakes the connections on l whose client has gone (end-
 * of-file waiting, nothing else to read). libmicrohttpd's edge-triggered
 * epoll loses that end-of-file when it arrives behind data it reads in
 * several rounds: the last, short read clears its read-ready flag and no new
 * edge comes, so the connection would wait for a timeout. shutdown(SHUT_RD)
 * raises a new edge; libmicrohttpd reads the end-of-file and closes the
 * connection itself.
 *
 * Only the read side: an end-of-file is also what a half-closed client
 * shows once libmicrohttpd has read its whole request, in the instant
 * before the handler's first call takes the slot off the idle list. Cutting
 * both sides there lost that client's answer (1 in 800 under load; 8 of 10
 * rounds with a 1 ms tick), where a read-side shutdown leaves the answer's
 * way open and the request runs. The slot stays listed, so the deadlines
 * still apply; `woken` keeps it from being shut again each tick. */
static void cut_gone(slot_list *l)
{
    for (slot *sl = l->head; sl; sl = sl->next) {
        char c;
        if (!sl->woken && recv(sl->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) {
            (void)shutdown(sl->fd, SHUT_RD);
            sl->woken = 1;
        }
    }
}

/* Closes connections that are late: idle ones (no complete headers)
 * idle_timeout_s after they got there, reading ones request_timeout_s after
 * their headers; both lists are in arrival order, so only expired heads are
 * looked at for that. Then every listed connection whose client has gone
 * (cut_gone: one MSG_PEEK each per tick, at most max_connections). */
static void *reaper_main(void *arg)
{
    mr_server *s = arg;
#ifdef __linux__
    prctl(PR_SET_NAME, "mr-reaper", 0, 0, 0);
#endif
    double idle = s->o.idle_timeout_s, req = s->o.request_timeout_s;
    double tick = (idle < req ? idle : req) / 4;
    if (tick > 1.0) tick = 1.0;
    if (tick < 0.05) tick = 0.05;
    pthread_mutex_lock(&s->conn_mu);
    while (!s->reaper_stop) {
        double now = mr_now();
        while (s->idle.head && now - s->idle.head->since >= idle) {
            slot_cut(s, s->idle.head);
            s->timeouts_idle++;
        }
        while (s->reading.head && now - s->reading.head->since >= req) {
            slot_cut(s, s->reading.head);
            s->timeouts_request++;
        }
        cut_gone(&s->idle);
        cut_gone(&s->reading);
        struct timespec ts;
        now_plus_ts(now + tick, &ts);
        pthread_cond_timedwait(&s->reaper_cv, &s->conn_mu, &ts);
    }
    pthread_mutex_unlock(&s->conn_mu);
    return NULL;
}

/* ---- the memory budget ------------------------------------------------------------- */

/* Sets the request's reservation to n bytes. Returns 0, or -1 when the
 * budget cannot spare the increase (the reservation is unchanged). */
static int reserve_to(mr_server *s, conn *cc, size_t n)
{
    if (n <= cc->reserved) {
        atomic_fetch_sub(&s->held, cc->reserved - n);
        cc->reserved = n;
        return 0;
    }
    size_t more = n - cc->reserved, cur = atomic_load(&s->held);
    do {
        if (cur > s->o.max_inflight_bytes || more > s->o.max_inflight_bytes - cur) return -1;
    } while (!atomic_compare_exchange_weak(&s->held, &cur, cur + more));
    cc->reserved = n;
    return 0;
}

/* ---- HTTP ---------------------------------------------------------------------- */

static enum MHD_Result reply_full(mr_server *s, struct MHD_Connection *c, conn *cc, int status, const char *body,
                                  size_t len, const char *ctype, int retry_after, int close)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    if (close) MHD_add_response_header(r, "Connection", "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    record(s, cc ? cc->ep : MR__EP_NONE, status, cc ? mr_now() - cc->t0 : 0);
    return ret;
}

static enum MHD_Result reply(mr_server *s, struct MHD_Connection *c, conn *cc, int status, const char *body,
                             size_t len, const char *ctype)
{
    return reply_full(s, c, cc, status, body, len, ctype, 0, 0);
}

/* A body that could not be built whole (an append ran out of memory: the
 * builders do not check each one, mr_buf keeps the first failure) is a 500,
 * never a truncated document under the status it was meant for. */
static enum MHD_Result reply_json(mr_server *s, struct MHD_Connection *c, conn *cc, int status, const mr_buf *b,
                                  int close)
{
    static const char oom[] = "{\"error\": \"out of memory building the response\"}";
    if (!b->data || b->failed) return reply_full(s, c, cc, 500, oom, sizeof oom - 1, "application/json", 0, close);
    return reply_full(s, c, cc, status, b->data, b->len, "application/json", status == 503, close);
}

static enum MHD_Result reply_error_close(mr_server *s, struct MHD_Connection *c, conn *cc, int status, const char *msg,
                                         int close)
{
    mr_buf b;
    mr_buf_init(&b);
    /* in the shape of the endpoint's protocol (/v1's, MLflow's, OIP's) */
    status = mr__proto_error_json(&b, mr__proto_of(cc ? cc->ep : MR__EP_NONE), status, msg);
    enum MHD_Result r = reply_json(s, c, cc, status, &b, close);
    mr_buf_free(&b);
    return r;
}

static enum MHD_Result reply_error(mr_server *s, struct MHD_Connection *c, conn *cc, int status, const char *msg)
{
    return reply_error_close(s, c, cc, status, msg, 0);
}

/* The final call of a request with a body; pc: a protocol's (NULL: /v1/predict). */
static enum MHD_Result handle_body(mr_server *s, struct MHD_Connection *c, conn *cc, const mr__proto_call *pc)
{
    if (s->o.constant_response) { /* the floor: the body was read; answer without parsing or predicting */
        static const char floor_body[] = "{\"model_version\": \"floor\", \"predictions\": [0.5]}";
        mr_buf_free(&cc->body);
        return reply(s, c, cc, 200, floor_body, sizeof floor_body - 1, "application/json");
    }
    const char *text = cc->body.data ? cc->body.data : "";
    size_t cost = pc ? mr__proto_cost(pc, text, cc->body.len) : mr__serve_json_cost(text, cc->body.len);
    if (cost > s->o.max_inflight_bytes)
        return reply_error(s, c, cc, 413, "request too large to parse within the server's memory budget "
                                          "(--max-inflight-bytes)");
    /* the text and its parse are both alive until the text is freed */
    if (reserve_to(s, cc, cc->reserved + cost) != 0)
        return reply_error(s, c, cc, 503, "too many request bytes in flight, retry later");
    job *j = mr_calloc(1, sizeof(*j));
    if (!j) return reply_error(s, c, cc, 500, "out of memory");
    mr_buf_init(&j->base.body);
    int st = pc ? mr__proto_parse(pc, text, cc->body.len, &j->base.req, &j->base.body)
                : mr__serve_parse_body(text, cc->body.len, s->o.max_rows, &j->base.req, &j->base.body);
    mr_buf_free(&cc->body);
    (void)reserve_to(s, cc, cost); /* the text is gone; the parse stays until the answer is sent */
    if (st) {
        enum MHD_Result r = reply_json(s, c, cc, st, &j->base.body, 0);
        mr_buf_free(&j->base.body);
        mr_free(j);
        return r;
    }
    j->mc = c;
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->queued >= s->o.max_queue) {
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        mr__serve_req_clear(&j->base.req);
        mr_buf_free(&j->base.body);
        mr_free(j);
        return reply_error(s, c, cc, 503, stopping ? "shutting down" : "queue full, retry later");
    }
    if (!s->head && !s->busy && !s->inline_n && s->http_threads >= 2) {
        /* The batcher is idle and nobody waits: score here, in the connection's thread. A lone request
         * would otherwise wait max_delay_us for company, then pay a hand-off to the batcher and back
         * (two wake-ups and a suspend/resume of the connection); under load requests queue behind a
         * busy batcher and are batched as before. Only while another pool thread is free to read the
         * next requests: with one pool thread every request would be scored in place, one at a time
         * (the soak's one-core server lost a third of its capacity that way). */
        const mr_bundle *b = s->cur;
        mr__serve_monitor *mon = s->mon;
        mr__serve_features *fs = s->fs;
        char version[MR_HASH_HEX_LEN + 1];
        memcpy(version, s->version, sizeof(version));
        s->inline_n++;
        pthread_mutex_unlock(&s->mu);
        mr__serve_job *jb = &j->base;
        size_t scored = 0;
        mr__serve_score_observed(&jb, 1, b, version, 1, mon, s->o.strict, fs, &scored);
        if (scored) record_batch(s, scored);
        pthread_mutex_lock(&s->mu);
        if (--s->inline_n == 0 && s->old) pthread_cond_signal(&s->work_cv); /* a retired bundle may go now */
        pthread_mutex_unlock(&s->mu);
        enum MHD_Result r = reply_json(s, c, cc, j->base.status, &j->base.body, 0);
        mr__serve_req_clear(&j->base.req);
        mr_buf_free(&j->base.body);
        mr_free(j);
        return r;
    }
    /* not suspended yet: the next call does it (see "Half-closed clients") */
    j->t_enq = mr_now();
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->queued++;
    s->inflight++;
    cc->job = j;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    return MHD_YES;
}

/* The name /v2/models/NAME serves the current bundle under, worked out once
 * per version (under mu). */
static const char *model_name_locked(mr_server *s)
{
    if (strcmp(s->model_name_of, s->version) != 0 && mr__proto_model_name(s->cur, s->model_name) == 0)
        memcpy(s->model_name_of, s->version, sizeof(s->model_name_of));
    return s->model_name;
}

/* A protocol's parse reads the bundle's schema (rows in schema order,
 * unknown inputs, a CSV's columns): the bundle is pinned meanwhile, so that
 * a reload cannot free it (see "Reload"). */
static enum MHD_Result handle_predict(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    if (cc->ep == MR__EP_PREDICT || s->o.constant_response) return handle_body(s, c, cc, NULL);
    char name[MR__MODEL_NAME_MAX + 1];
    pthread_mutex_lock(&s->mu);
    mr__proto_call pc = {cc->ep, cc->csv, s->cur, name, s->o.max_rows};
    memcpy(name, model_name_locked(s), sizeof(name));
    s->pinned++;
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r = handle_body(s, c, cc, &pc);
    pthread_mutex_lock(&s->mu);
    if (--s->pinned == 0 && s->old) pthread_cond_signal(&s->work_cv); /* a retired bundle may go now */
    pthread_mutex_unlock(&s->mu);
    return r;
}

/* Called again after the batcher resumed the connection. */
static enum MHD_Result answer_job(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    return reply_json(s, c, cc, cc->job->base.status, &cc->job->base.body, 0);
}

/* The second call of a queued request: the answer if the batcher is done,
 * else the suspension that its resume will end. */
static enum MHD_Result await_job(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    pthread_mutex_lock(&s->mu);
    int done = cc->job->done;
    if (!done && !cc->job->suspended) {
        cc->job->suspended = 1;
        MHD_suspend_connection(c);
    }
    pthread_mutex_unlock(&s->mu);
    return done ? answer_job(s, c, cc) : MHD_YES;
}

/* The request ended (answered, or its connection closed): its job goes,
 * unless the batcher holds it, which then frees it (orphan). */
static void job_finish(mr_server *s, job *j)
{
    pthread_mutex_lock(&s->mu);
    if (!j->done && j->taken) {
        j->orphan = 1;
    } else {
        if (!j->done) { /* still queued: take it off */
            job **pp = &s->head, *prev = NULL;
            while (*pp && *pp != j) {
                prev = *pp;
                pp = &(*pp)->next;
            }
            if (*pp) {
                *pp = j->next;
                if (s->tail == j) s->tail = prev;
                s->queued--;
            }
        }
        job_free_locked(s, j);
    }
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result handle_model(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    mr_buf b;
    mr_buf_init(&b);
    pthread_mutex_lock(&s->mu); /* the bundle may not be retired while we read it */
    mr_buf_printf(&b, "{\"version\": \"%s\", \"manifest\": %s}", s->version, mr_bundle_manifest_json(s->cur));
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r = reply_json(s, c, cc, 200, &b, 0);
    mr_buf_free(&b);
    return r;
}

/* Whether t names the model served (and its version, if t has one); if
 * not, why, for the 404. */
static int model_served(mr_server *s, const mr__proto_target *t, char *why, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    const char *name = model_name_locked(s);
    int ok = mr__proto_target_matches(t, name, s->version);
    int shown = (int)(t->model_len > 64 ? 64 : t->model_len);
    if (!ok && t->model_len == strlen(name) && !memcmp(t->model, name, t->model_len))
        snprintf(why, cap, "model '%s' has no version '%.*s' (it serves version %s)", name,
                 (int)(t->version_len > 64 ? 64 : t->version_len), t->version, s->version);
    else if (!ok)
        snprintf(why, cap, "unknown model '%.*s' (this server serves '%s')", shown, t->model, name);
    pthread_mutex_unlock(&s->mu);
    return ok;
}

/* GET /v2, /v2/health/..., /v2/models/NAME[/ready]. */
static enum MHD_Result handle_v2(mr_server *s, struct MHD_Connection *c, conn *cc, mr__serve_endpoint ep)
{
    mr_buf b;
    mr_buf_init(&b);
    pthread_mutex_lock(&s->mu); /* the bundle may not be retired while we read it */
    int ready = s->cur && !s->stopping, status = 200;
    switch (ep) {
    case MR__EP_V2_LIVE: mr_buf_puts(&b, "{\"live\": true}"); break;
    case MR__EP_V2_SERVER: mr__proto_v2_server_json(&b); break;
    case MR__EP_V2_MODEL: mr__proto_v2_model_json(&b, s->cur, model_name_locked(s), s->version); break;
    default: /* the server's readiness, or the model's */
        mr__proto_v2_ready_json(&b, ep == MR__EP_V2_MODEL_READY ? model_name_locked(s) : NULL, ready);
        status = ready ? 200 : 503;
        break;
    }
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r = reply_json(s, c, cc, status, &b, 0);
    mr_buf_free(&b);
    return r;
}

static const char *query_arg(void *ctx, const char *name)
{
    return MHD_lookup_connection_value(ctx, MHD_GET_ARGUMENT_KIND, name);
}

/* GET /v1/features?KEY=...[&as_of=T]: the raw vector the stores hold for an
 * entity (?entity=... for a lone store of one key). The stores are pinned
 * with their bundle meanwhile. */
static enum MHD_Result handle_features(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    pthread_mutex_lock(&s->mu);
    mr__serve_features *fs = s->fs;
    if (fs) s->pinned++;
    pthread_mutex_unlock(&s->mu);
    if (!fs) return reply_error(s, c, cc, 404, "the model reads no features from an online store");
    char msg[700];
    mr_buf b;
    mr_buf_init(&b);
    int st = mr__features_vector_json(fs, query_arg, c, &b, msg, sizeof(msg));
    pthread_mutex_lock(&s->mu);
    if (--s->pinned == 0 && s->old) pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r = st ? reply_error(s, c, cc, st, msg) : reply_json(s, c, cc, b.failed ? 500 : 200, &b, 0);
    mr_buf_free(&b);
    return r;
}

static enum MHD_Result add_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    (void)kind;
    mr__serve_head_add(cls, key, value);
    return MHD_YES;
}

/* The first call: the headers are in and no body byte has been read.
 * Everything that can be decided from the headers is decided here. */
static enum MHD_Result on_headers(mr_server *s, struct MHD_Connection *c, const char *url, const char *method,
                                  void **con_cls)
{
    conn *cc = mr_calloc(1, sizeof(*cc));
    if (!cc) return MHD_NO;
    mr_buf_init(&cc->body);
    cc->t0 = mr_now();
    *con_cls = cc;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    cc->sl = ci ? ci->socket_context : NULL;
    mr__serve_head h;
    mr__serve_head_init(&h);
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, &h);
    mr__serve_verdict v;
    mr__serve_check_head(&h, method, url, s->token, s->o.max_body, &v);
    cc->ep = v.ep;
    cc->csv = v.csv;
    char why[MR__MODEL_NAME_MAX + 200];
    int unknown_model = !v.status && v.target.model && !model_served(s, &v.target, why, sizeof(why));
    int reading = !v.status && !unknown_model && mr__serve_endpoint_has_body(v.ep) && v.body_len;
    if (conn_to(s, cc, reading ? SLOT_READING : SLOT_BUSY) != 0) return MHD_NO; /* shut down meanwhile */
    if (v.status) return reply_error_close(s, c, cc, v.status, v.msg, v.close);
    if (unknown_model) return reply_error(s, c, cc, 404, why);
    switch (v.ep) {
    case MR__EP_HEALTHZ: return reply(s, c, cc, 200, "ok\n", 3, "text/plain");
    case MR__EP_READYZ: {
        pthread_mutex_lock(&s->mu);
        int ready = s->cur && !s->stopping;
        pthread_mutex_unlock(&s->mu);
        return ready ? reply(s, c, cc, 200, "ready\n", 6, "text/plain") : reply_error(s, c, cc, 503, "not ready");
    }
    case MR__EP_METRICS: {
        mr_buf b;
        mr_buf_init(&b);
        metrics_text(s, &b);
        enum MHD_Result r = reply(s, c, cc, b.data ? 200 : 500, b.data ? b.data : "", b.len, "text/plain; version=0.0.4");
        mr_buf_free(&b);
        return r;
    }
    case MR__EP_MODEL: return handle_model(s, c, cc);
    case MR__EP_DRIFT: {
        mr_buf b;
        mr_buf_init(&b);
        pthread_mutex_lock(&s->mu);
        mr__serve_monitor *mon = s->mon;
        char version[MR_HASH_HEX_LEN + 1];
        memcpy(version, s->version, sizeof(version));
        s->pinned++;
        pthread_mutex_unlock(&s->mu);
        mr__monitor_drift_json(mon, version, &b);
        pthread_mutex_lock(&s->mu);
        if (--s->pinned == 0 && s->old) pthread_cond_signal(&s->work_cv);
        pthread_mutex_unlock(&s->mu);
        enum MHD_Result r = reply(s, c, cc, b.data && !b.failed ? 200 : 500, b.data ? b.data : "", b.len, "application/json");
        mr_buf_free(&b);
        return r;
    }
    case MR__EP_FEATURES: return handle_features(s, c, cc);
    case MR__EP_PING: { /* MLflow's: a newline (as application/json) while the model is loaded */
        pthread_mutex_lock(&s->mu);
        int ready = s->cur && !s->stopping;
        pthread_mutex_unlock(&s->mu);
        return ready ? reply(s, c, cc, 200, "\n", 1, "application/json") : reply_error(s, c, cc, 503, "not ready");
    }
    case MR__EP_VERSION: /* MLflow's: the bare version string */
        return reply(s, c, cc, 200, mr_version(), strlen(mr_version()), "application/json");
    case MR__EP_V2_LIVE:
    case MR__EP_V2_READY:
    case MR__EP_V2_SERVER:
    case MR__EP_V2_MODEL:
    case MR__EP_V2_MODEL_READY: return handle_v2(s, c, cc, v.ep);
    default: break;
    }
    /* POST /v1/predict, /invocations, /v2/.../infer: reserve the announced body, or as it comes */
    cc->chunked = v.body_len == MR__BODY_CHUNKED;
    if (!cc->chunked) {
        if (reserve_to(s, cc, (size_t)v.body_len) != 0)
            return reply_error(s, c, cc, 503, "too many request bytes in flight, retry later");
        cc->body.limit = v.body_len ? (size_t)v.body_len : 1; /* 0 would mean the default cap */
    } else {
        cc->body.limit = s->o.max_body;
    }
    return MHD_YES;
}

/* A piece of the body (n bytes). */
static enum MHD_Result on_body(mr_server *s, conn *cc, const char *data, size_t n)
{
    if (mr_now() - cc->t0 > s->o.request_timeout_s) { /* a slow sender past its deadline */
        pthread_mutex_lock(&s->conn_mu);
        s->timeouts_request++;
        pthread_mutex_unlock(&s->conn_mu);
        return MHD_NO;
    }
    if (cc->too_large || cc->over_budget) return MHD_YES; /* read on, keep nothing */
    if (n > s->o.max_body - cc->body.len) {
        cc->too_large = 1;
    } else if (cc->chunked && cc->body.len + n > cc->reserved) {
        /* what the buffer may grow to: it doubles, up to max_body + 1 */
        size_t want = 2 * (cc->body.len + n), top = s->o.max_body + 1;
        if (want < 4096) want = 4096;
        if (want > top) want = top;
        if (reserve_to(s, cc, want) != 0) cc->over_budget = 1;
    }
    if (!cc->too_large && !cc->over_budget && mr_buf_append(&cc->body, data, n) != MR_OK) cc->too_large = 1;
    if (cc->too_large || cc->over_budget) {
        mr_buf_free(&cc->body);
        (void)reserve_to(s, cc, 0);
    }
    return MHD_YES;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    mr_server *s = cls;
    conn *cc = *con_cls;
    if (!cc) return on_headers(s, c, url, method, con_cls);
    if (cc->job) return await_job(s, c, cc);
    if (*upload_size) {
        size_t n = *upload_size;
        *upload_size = 0;
        return on_body(s, cc, upload, n);
    }
    /* the final call: the whole request is in */
    if (conn_to(s, cc, SLOT_BUSY) != 0) return MHD_NO;
    if (cc->too_large) return reply_error(s, c, cc, 413, "request body too large");
    if (cc->over_budget) return reply_error(s, c, cc, 503, "too many request bytes in flight, retry later");
    return handle_predict(s, c, cc);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    mr_server *s = cls;
    conn *cc = *con_cls;
    if (!cc) return;
    if (cc->job) job_finish(s, cc->job);
    (void)reserve_to(s, cc, 0);
    (void)conn_to(s, cc, SLOT_IDLE); /* waiting for the next request (or about to close) */
    mr_buf_free(&cc->body);
    mr_free(cc);
    *con_cls = NULL;
}

/* ---- lifecycle --------------------------------------------------------------- */

/* libmicrohttpd's own messages go to the log sink (the library never prints). */
static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\r\n")] = '\0';
    mr_log(MR_LOG_WARN, "http: %s", buf);
}

/* b's online store (NULL when b has no feature service). A --store for a
 * bundle without one is a mistake worth stopping for. */
static mr_status serving_features(const mr_bundle *b, char *const *store_paths, size_t n, mr__serve_features **out,
                                   mr_error *err)
{
    *out = NULL;
    if (n && !mr_bundle_service_of(b)) {
        MR_ERR(err, MR_E_INVALID_ARG, "--store %s: the model reads no features from an online store", store_paths[0]);
        mr_error_hint(err, "package it with online: ${stages.<materialize_online stage>} (docs/featurestore.md)");
        return MR_E_INVALID_ARG;
    }
    return mr__features_open(b, (const char *const *)store_paths, n, out, err);
}

static void server_free(mr_server *s)
{
    while (s->old) {
        retired *r = s->old;
        s->old = r->next;
        mr__features_free(r->fs);
        mr_bundle_free(r->b);
        mr__monitor_free(r->mon);
        mr_free(r);
    }
    mr__features_free(s->fs);
    mr_bundle_free(s->cur);
    mr__monitor_free(s->mon);
    for (size_t i = 0; i < s->n_store_paths; i++) mr_free(s->store_paths[i]);
    mr_free(s->store_paths);
    mr_free(s->batch);
    mr_free(s->bundle_path);
    mr_free(s->host);
    mr_free(s->token);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->stats_mu);
    pthread_mutex_destroy(&s->conn_mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->idle_cv);
    pthread_cond_destroy(&s->reaper_cv);
    mr_free(s);
}

static void stop_reaper(mr_server *s)
{
    if (!s->reaper_started) return;
    pthread_mutex_lock(&s->conn_mu);
    s->reaper_stop = 1;
    pthread_cond_signal(&s->reaper_cv);
    pthread_mutex_unlock(&s->conn_mu);
    pthread_join(s->reaper, NULL);
    s->reaper_started = 0;
}

mr_status mr_server_start(const mr_server_opts *o, mr_server **out, mr_error *err)
{
    *out = NULL;
    if (!o->bundle_path) return MR_ERR(err, MR_E_INVALID_ARG, "no bundle to serve");
    if (o->max_batch < 1 || o->max_queue < 1 || o->max_body < 16)
        return MR_ERR(err, MR_E_INVALID_ARG, "max batch, queue and body must be positive");
    if (o->max_inflight_bytes < o->max_body)
        return MR_ERR(err, MR_E_INVALID_ARG,
                      "--max-inflight-bytes %zu is below --max-body %zu: no request of the largest size could be read",
                      o->max_inflight_bytes, o->max_body);
    if (o->idle_timeout_s < 1 || o->request_timeout_s < 1 || o->idle_timeout_s > 86400 || o->request_timeout_s > 86400)
        return MR_ERR(err, MR_E_INVALID_ARG, "the idle and request timeouts take 1..86400 seconds");
    if (o->max_connections == 1 || o->max_connections > 65536)
        return MR_ERR(err, MR_E_INVALID_ARG, "--max-connections %u out of range (2..65536)", o->max_connections);
    if (o->port < 0 || o->port > 65535) return MR_ERR(err, MR_E_INVALID_ARG, "--port %d out of range", o->port);
    const char *host = o->host ? o->host : "127.0.0.1";
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    /* Bound first: a bad address or a busy port fails before the bundle is read */
    int fd = -1, v6 = 0;
    char shown[64];
    mr_status lrc = mr_net_listen(host, o->port, &fd, &v6, shown, sizeof(shown), err);
    if (lrc != MR_OK) return lrc;
    mr_server *s = mr_calloc(1, sizeof(*s));
    if (!s) {
        close(fd);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    s->o = *o;
    if (!s->o.max_connections) s->o.max_connections = 512;
    /* a quarter of the slots (at least one) is kept from idle connections */
    s->idle_cap = s->o.max_connections - (s->o.max_connections / 4 ? s->o.max_connections / 4 : 1);
    atomic_init(&s->held, 0);
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->stats_mu, NULL);
    pthread_mutex_init(&s->conn_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->work_cv, &ca);
    pthread_cond_init(&s->idle_cv, &ca);
    pthread_cond_init(&s->reaper_cv, &ca);
    pthread_condattr_destroy(&ca);
    s->bundle_path = mr_strdup(o->bundle_path);
    s->host = mr_strdup(host);
    s->token = o->token ? mr_strdup(o->token) : NULL;
    int store_oom = 0;
    if (o->n_store_paths && (s->store_paths = mr_calloc(o->n_store_paths, sizeof(char *))) != NULL) {
        for (size_t i = 0; i < o->n_store_paths; i++) store_oom |= !(s->store_paths[i] = mr_strdup(o->store_paths[i]));
        s->n_store_paths = o->n_store_paths;
    } else if (o->n_store_paths) {
        store_oom = 1;
    }
    s->batch = mr_calloc((o->max_batch < 4096 ? o->max_batch : 4096) + 1, sizeof(mr__serve_job *));
    if (!s->bundle_path || !s->host || (o->token && !s->token) || store_oom || !s->batch) {
        close(fd);
        server_free(s);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    s->o.bundle_path = s->bundle_path;
    s->o.host = s->host;
    s->o.token = s->token;
    s->o.store_paths = (const char *const *)s->store_paths;
    mr_status rc = mr_bundle_load(s->bundle_path, &s->cur, err);
    if (rc == MR_OK && !(s->mon = mr__monitor_new(s->cur))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = serving_features(s->cur, s->store_paths, s->n_store_paths, &s->fs, err);
    if (rc != MR_OK) {
        close(fd);
        server_free(s);
        return rc;
    }
    memcpy(s->version, mr_bundle_version_id(s->cur), sizeof(s->version));
    if (pthread_create(&s->batcher, NULL, batcher_main, s) != 0) {
        close(fd);
        server_free(s);
        return MR_ERR(err, MR_E_INTERNAL, "cannot start the batcher thread");
    }
    s->batcher_started = 1;
    if (pthread_create(&s->reaper, NULL, reaper_main, s) == 0) s->reaper_started = 1;
    /* A pool of event-loop threads (epoll on Linux), one per core up to 4
     * unless http_threads says otherwise; handlers never block (see top). */
    unsigned pool = o->http_threads;
    if (pool == 0) {
        int nc = mr_cpu_count(); /* the CPUs it may run on */
        pool = nc > 4 ? 4 : (unsigned)nc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6) flags |= MHD_USE_IPv6;
    /* a pool of 1 is the daemon's own polling thread (libmicrohttpd warns
     * about a pool size below 2, so the option is left out then) */
    s->http_threads = pool;
    struct MHD_OptionItem pool_opt[2] = {{MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)pool, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (pool < 2) pool_opt[0].option = MHD_OPTION_END;
    if (!s->reaper_started) rc = MR_ERR(err, MR_E_INTERNAL, "cannot start the connection reaper thread");
    if (rc == MR_OK)
        s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_ARRAY, pool_opt, MHD_OPTION_CONNECTION_LIMIT,
                                s->o.max_connections, MHD_OPTION_CONNECTION_TIMEOUT, s->o.idle_timeout_s,
                                MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16 * 1024, MHD_OPTION_NOTIFY_COMPLETED,
                                on_completed, s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!s->d) {
        int e = errno;
        /* A started daemon owns the socket (MHD_stop_daemon closes it); one
         * that failed to start may have closed it already. */
        if (fd >= 0 && fcntl(fd, F_GETFD) != -1) close(fd);
        stop_reaper(s);
        pthread_mutex_lock(&s->mu);
        s->stopping = 1;
        pthread_cond_signal(&s->work_cv);
        pthread_mutex_unlock(&s->mu);
        pthread_join(s->batcher, NULL);
        server_free(s);
        if (rc != MR_OK) return rc;
        return MR_ERR_SYS(err, MR_E_IO, e, "cannot serve on %s:%d: the HTTP daemon did not start", shown, o->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? (int)info->port : o->port;
    *out = s;
    return MR_OK;
}

int mr_server_port(const mr_server *s) { return s->port; }

const char *mr_server_model_version(const mr_server *s) { return s->version; }

mr_status mr_server_reload(mr_server *s, mr_error *err) { return mr_server_reload_path(s, NULL, err); }

mr_status mr_server_reload_path(mr_server *s, const char *path, mr_error *err)
{
    char *np = path ? mr_strdup(path) : NULL;
    if (path && !np) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_bundle *nb = NULL;
    mr_status rc = mr_bundle_load(np ? np : s->bundle_path, &nb, err);
    retired *r = rc == MR_OK ? mr_calloc(1, sizeof(*r)) : NULL;
    mr__serve_monitor *nm = r ? mr__monitor_new(nb) : NULL; /* a new bundle, new counters and drift */
    mr__serve_features *nf = NULL;
    if (rc == MR_OK && (!r || !nm)) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = serving_features(nb, s->store_paths, s->n_store_paths, &nf, err);
    if (rc != MR_OK) {
        mr__features_free(nf);
        mr__monitor_free(nm);
        mr_free(r);
        mr_bundle_free(nb);
        mr_free(np);
        return rc;
    }
    if (np) { /* only the controlling thread reads the path */
        mr_free(s->bundle_path);
        s->bundle_path = np;
        s->o.bundle_path = np;
    }
    pthread_mutex_lock(&s->mu);
    r->b = s->cur;
    r->mon = s->mon;
    r->fs = s->fs;
    r->next = s->old;
    s->old = r;
    s->cur = nb;
    s->mon = nm;
    s->fs = nf;
    memcpy(s->version, mr_bundle_version_id(nb), sizeof(s->version));
    s->reloads++;
    pthread_cond_signal(&s->work_cv); /* let the batcher free the old one soon */
    pthread_mutex_unlock(&s->mu);
    return MR_OK;
}

void mr_server_stop(mr_server *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->work_cv);
    pthread_mutex_unlock(&s->mu);
    if (s->batcher_started) pthread_join(s->batcher, NULL); /* answers everything queued first */
    /* ... and lets the pool threads send those answers (bounded: 5 s) */
    struct timespec ts;
    now_plus_ts(mr_now() + 5.0, &ts);
    pthread_mutex_lock(&s->mu);
    while (s->inflight > 0)
        if (pthread_cond_timedwait(&s->idle_cv, &s->mu, &ts) == ETIMEDOUT) break;
    pthread_mutex_unlock(&s->mu);
    stop_reaper(s);
    MHD_stop_daemon(s->d); /* closes every connection; NOTIFY_CLOSED frees their slots */
    server_free(s);
}
