/* The HTTP model server (include/millrace/serve.h, docs/serve.md).
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
 * longer uses them. Queued requests are never dropped, so a swap fails no
 * request. */
#include "millrace/bundle.h"
#include "millrace/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <pthread.h>
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
#define N_CODES 9
static const int codes[N_CODES] = {200, 400, 401, 404, 405, 413, 422, 500, 503};

typedef struct job {
    json_t *doc;       /* the parsed request (owned) */
    size_t n_rows;
    int columnar;
    double t_enq;      /* mr_now() at enqueue */
    int done;          /* set by the batcher (under mu) before it resumes the connection */
    int status;
    mr_buf body;       /* response body */
    struct MHD_Connection *mc; /* suspended while the job is queued */
    struct job *next;
} job;

typedef struct retired {
    mr_bundle *b;
    struct retired *next;
} retired;

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
    mr_bundle *cur;
    retired *old;
    job **batch;       /* the batcher's array of jobs (max_batch, at most 4096) */
    char version[MR_HASH_HEX_LEN + 1];
    uint64_t reloads;
    /* metrics (under stats_mu) */
    pthread_mutex_t stats_mu;
    uint64_t by_code[N_CODES + 1]; /* last: other */
    uint64_t lat_count[N_LAT_BUCKETS + 1];
    double lat_sum;
    uint64_t batch_count[N_BATCH_BUCKETS + 1];
    double batch_sum;
    uint64_t batches;
};

typedef struct conn {
    mr_buf body;
    double t0;
    int too_large;
    job *job; /* the queued or answered prediction of this request */
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
}

/* ---- metrics ---------------------------------------------------------------- */

static void record(mr_server *s, int status, double secs)
{
    pthread_mutex_lock(&s->stats_mu);
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
}

/* ---- request validation and column building (batcher thread) ---------------- */

/* The value of input `name` in row r of the job, or NULL if absent. */
static json_t *job_value(const job *j, const char *name, size_t r)
{
    if (j->columnar) return json_array_get(json_object_get(json_object_get(j->doc, "columns"), name), r);
    return json_object_get(json_array_get(json_object_get(j->doc, "rows"), r), name);
}

static int set_error(job *j, int status, const char *msg, const char *field, long row)
{
    j->status = status;
    j->body.len = 0;
    mr_buf_puts(&j->body, "{\"error\": ");
    mr_buf_json_str(&j->body, msg);
    if (field) {
        mr_buf_puts(&j->body, ", \"field\": ");
        mr_buf_json_str(&j->body, field);
    }
    if (row >= 0) mr_buf_printf(&j->body, ", \"row\": %ld", row);
    mr_buf_puts(&j->body, "}");
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
static int job_fill(job *j, const mr_bundle *b, mr_column **cols, int dry)
{
    size_t n_in = mr_bundle_n_inputs(b);
    for (size_t r = 0; r < j->n_rows; r++) {
        for (size_t i = 0; i < n_in; i++) {
            mr_cell cell;
            mr_bundle_bad bad;
            const mr_cell *v = json_cell(job_value(j, mr_bundle_input_at(b, i)->name, r), &cell);
            mr_status st = mr_bundle_coerce_value(b, i, v, 0, dry ? NULL : cols[i], &bad);
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

static void process_batch(mr_server *s, job **jobs, size_t n_jobs, const mr_bundle *b, const char *version)
{
    size_t n_in = mr_bundle_n_inputs(b), rows = 0;
    mr_table *t = NULL;
    mr_column **cols = mr_calloc(n_in ? n_in : 1, sizeof(mr_column *));
    mr_error err;
    mr_error_init(&err);
    int ok = cols && mr_table_new(&t, &err) == MR_OK;
    for (size_t i = 0; ok && i < n_in; i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        ok = mr_column_new(in->name, mr_bundle_input_column_type(in), 64, &cols[i], &err) == MR_OK;
    }
    for (size_t q = 0; ok && q < n_jobs; q++) {
        job *j = jobs[q];
        j->status = 0;
        if (job_fill(j, b, cols, 1) != 0) continue;
        if (job_fill(j, b, cols, 0) != 0) { /* OOM half-way: columns are inconsistent */
            ok = 0;
            break;
        }
        rows += j->n_rows;
    }
    for (size_t i = 0; ok && i < n_in; i++) {
        ok = mr_table_add_column(t, cols[i], &err) == MR_OK;
        cols[i] = NULL;
    }
    double *pred = NULL;
    size_t k = 0;
    if (ok && rows) {
        t->n_rows = rows;
        ok = mr_bundle_predict_table(b, t, 0, rows >= 1024 ? s->o.threads : 1, &pred, &k, &err) == MR_OK;
    }
    if (rows) record_batch(s, rows);
    size_t at = 0;
    for (size_t q = 0; q < n_jobs; q++) {
        job *j = jobs[q];
        if (j->status) continue;
        if (!ok) {
            set_error(j, 500, err.msg[0] ? err.msg : "prediction failed", NULL, -1);
            continue;
        }
        j->status = 200;
        j->body.len = 0;
        mr_buf_printf(&j->body, "{\"model_version\": \"%s\", \"predictions\": [", version);
        for (size_t r = 0; r < j->n_rows; r++, at++) {
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
        mr_buf_puts(&j->body, "]}");
    }
    mr_free(pred);
    for (size_t i = 0; cols && i < n_in; i++) mr_column_free(cols[i]);
    mr_free(cols);
    mr_table_free(t);
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

static void *batcher_main(void *arg)
{
    mr_server *s = arg;
#ifdef __linux__
    prctl(PR_SET_NAME, "mr-batcher", 0, 0, 0); /* shows in top -H and perf */
#endif
    size_t cap = s->o.max_batch < 4096 ? s->o.max_batch : 4096;
    job **batch = s->batch; /* allocated by mr_server_start, so the batcher cannot fail to start */
    char version[MR_HASH_HEX_LEN + 1];
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->work_cv, &s->mu);
        while (s->old) { /* not in use: the previous batch is finished */
            retired *r = s->old;
            s->old = r->next;
            mr_bundle_free(r->b);
            mr_free(r);
        }
        if (!s->head) break; /* stopping and drained */
        size_t n = 0, rows = 0;
        double deadline = s->head->t_enq + s->o.max_delay_us * 1e-6;
        for (;;) {
            if (s->head) {
                if (n > 0 && (rows + s->head->n_rows > s->o.max_batch || n >= cap)) break;
                job *j = s->head;
                s->head = j->next;
                if (!s->head) s->tail = NULL;
                s->queued--;
                batch[n++] = j;
                rows += j->n_rows;
                if (rows >= s->o.max_batch) break;
                continue;
            }
            if (s->stopping || s->o.max_delay_us == 0 || mr_now() >= deadline) break;
            struct timespec ts;
            now_plus_ts(deadline, &ts);
            pthread_cond_timedwait(&s->work_cv, &s->mu, &ts);
        }
        const mr_bundle *b = s->cur;
        memcpy(version, s->version, sizeof(version));
        pthread_mutex_unlock(&s->mu);
        process_batch(s, batch, n, b, version);
        pthread_mutex_lock(&s->mu);
        /* A job may be freed as soon as its connection resumes: read the
         * connection first, and touch nothing of the job afterwards. */
        for (size_t q = 0; q < n; q++) {
            struct MHD_Connection *mc = batch[q]->mc;
            batch[q]->done = 1;
            MHD_resume_connection(mc);
        }
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* ---- HTTP ---------------------------------------------------------------------- */

static enum MHD_Result reply(mr_server *s, struct MHD_Connection *c, conn *cc, int status, const char *body,
                             size_t len, const char *ctype, int retry_after)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    if (retry_after) MHD_add_response_header(r, "Retry-After", "1");
    if (status == 401) MHD_add_response_header(r, "WWW-Authenticate", "Bearer");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    record(s, status, cc ? mr_now() - cc->t0 : 0);
    return ret;
}

static enum MHD_Result reply_error(mr_server *s, struct MHD_Connection *c, conn *cc, int status, const char *msg)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_buf_puts(&b, "{\"error\": ");
    mr_buf_json_str(&b, msg);
    mr_buf_puts(&b, "}");
    enum MHD_Result r = reply(s, c, cc, status, b.data ? b.data : "{}", b.data ? b.len : 2, "application/json",
                              status == 503);
    mr_buf_free(&b);
    return r;
}

static int token_ok(mr_server *s, struct MHD_Connection *c)
{
    if (!s->token) return 1;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7) != 0) return 0;
    h += 7;
    size_t a = strlen(h), b = strlen(s->token);
    unsigned char diff = (unsigned char)(a != b);
    for (size_t i = 0; i < b; i++) diff |= (unsigned char)(h[i < a ? i : 0] ^ s->token[i]);
    return diff == 0;
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

static enum MHD_Result handle_predict(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    json_error_t je;
    json_t *doc = json_loadb(cc->body.data ? cc->body.data : "", cc->body.len, 0, &je);
    if (!doc) {
        char msg[400];
        snprintf(msg, sizeof(msg), "malformed JSON at line %d, column %d (byte %d): %s", je.line, je.column,
                 je.position, je.text);
        mr_buf b;
        mr_buf_init(&b);
        mr_buf_puts(&b, "{\"error\": ");
        mr_buf_json_str(&b, msg);
        mr_buf_printf(&b, ", \"line\": %d, \"column\": %d, \"position\": %d}", je.line, je.column, je.position);
        enum MHD_Result r = reply(s, c, cc, 400, b.data ? b.data : "{}", b.data ? b.len : 2, "application/json", 0);
        mr_buf_free(&b);
        return r;
    }
    job *j = mr_calloc(1, sizeof(*j));
    if (!j) {
        json_decref(doc);
        return reply_error(s, c, cc, 500, "out of memory");
    }
    int too_many = 0;
    const char *bad = shape_of(doc, s->o.max_rows, &j->n_rows, &j->columnar, &too_many);
    if (bad) {
        json_decref(doc);
        mr_free(j);
        return reply_error(s, c, cc, too_many ? 413 : 400, bad);
    }
    j->doc = doc;
    j->mc = c;
    mr_buf_init(&j->body);
    pthread_mutex_lock(&s->mu);
    if (s->stopping || s->queued >= s->o.max_queue) {
        int stopping = s->stopping;
        pthread_mutex_unlock(&s->mu);
        json_decref(doc);
        mr_free(j);
        return reply_error(s, c, cc, 503, stopping ? "shutting down" : "queue full, retry later");
    }
    /* Suspend before the batcher can see the job, so its resume always
     * follows the suspension. */
    MHD_suspend_connection(c);
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

/* Called again after the batcher resumed the connection. */
static enum MHD_Result answer_job(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    job *j = cc->job;
    return reply(s, c, cc, j->status, j->body.data ? j->body.data : "{}", j->body.data ? j->body.len : 2,
                 "application/json", 0);
}

static void job_finish(mr_server *s, job *j)
{
    json_decref(j->doc);
    mr_buf_free(&j->body);
    mr_free(j);
    pthread_mutex_lock(&s->mu);
    if (--s->inflight == 0) pthread_cond_broadcast(&s->idle_cv);
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result handle_model(mr_server *s, struct MHD_Connection *c, conn *cc)
{
    mr_buf b;
    mr_buf_init(&b);
    pthread_mutex_lock(&s->mu); /* the bundle may not be retired while we read it */
    mr_buf_printf(&b, "{\"version\": \"%s\", \"manifest\": %s}", s->version, mr_bundle_manifest_json(s->cur));
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r = reply(s, c, cc, b.data ? 200 : 500, b.data ? b.data : "{}", b.data ? b.len : 2,
                              "application/json", 0);
    mr_buf_free(&b);
    return r;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    mr_server *s = cls;
    conn *cc = *con_cls;
    if (!cc) {
        cc = mr_calloc(1, sizeof(*cc));
        if (!cc) return MHD_NO;
        mr_buf_init(&cc->body);
        cc->body.limit = s->o.max_body + 1;
        cc->t0 = mr_now();
        *con_cls = cc;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end = NULL;
            errno = 0;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno == 0 && end && *end == '\0' && v > s->o.max_body)
                return reply_error(s, c, cc, 413, "request body too large");
        }
        return MHD_YES;
    }
    if (cc->job) {
        pthread_mutex_lock(&s->mu);
        int done = cc->job->done;
        pthread_mutex_unlock(&s->mu);
        return done ? answer_job(s, c, cc) : MHD_YES;
    }
    if (*upload_size) {
        if (!cc->too_large && cc->body.len + *upload_size <= s->o.max_body) {
            if (mr_buf_append(&cc->body, upload, *upload_size) != MR_OK) cc->too_large = 1;
        } else {
            cc->too_large = 1; /* keep reading, keep nothing */
        }
        *upload_size = 0;
        return MHD_YES;
    }
    if (cc->too_large) return reply_error(s, c, cc, 413, "request body too large");
    if (!strcmp(url, "/healthz")) return reply(s, c, cc, 200, "ok\n", 3, "text/plain", 0);
    if (!token_ok(s, c)) return reply_error(s, c, cc, 401, "missing or wrong bearer token");
    int get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/readyz")) {
        pthread_mutex_lock(&s->mu);
        int ready = s->cur && !s->stopping;
        pthread_mutex_unlock(&s->mu);
        return ready ? reply(s, c, cc, 200, "ready\n", 6, "text/plain", 0) : reply_error(s, c, cc, 503, "not ready");
    }
    if (!strcmp(url, "/metrics")) {
        if (!get) return reply_error(s, c, cc, 405, "use GET");
        mr_buf b;
        mr_buf_init(&b);
        metrics_text(s, &b);
        enum MHD_Result r = reply(s, c, cc, 200, b.data ? b.data : "", b.len, "text/plain; version=0.0.4", 0);
        mr_buf_free(&b);
        return r;
    }
    if (!strcmp(url, "/v1/model")) return get ? handle_model(s, c, cc) : reply_error(s, c, cc, 405, "use GET");
    if (!strcmp(url, "/v1/predict")) return post ? handle_predict(s, c, cc) : reply_error(s, c, cc, 405, "use POST");
    return reply_error(s, c, cc, 404, "no such endpoint (try /v1/predict, /v1/model, /healthz, /readyz, /metrics)");
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)c;
    (void)toe;
    conn *cc = *con_cls;
    if (!cc) return;
    if (cc->job) job_finish(cls, cc->job); /* a queued job's connection is suspended: it cannot end before done */
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

/* Binds and listens on addr here rather than in libmicrohttpd, whose bind
 * failure names neither the address nor the port ("port 0" for an address
 * given as a sockaddr). The options are libmicrohttpd's defaults:
 * SO_REUSEADDR (a restart need not wait out TIME_WAIT), IPV6_V6ONLY (::
 * is IPv6 only), a SOMAXCONN backlog. shown: "127.0.0.1" or "[::1]". */
static mr_status listen_socket(const struct sockaddr *addr, socklen_t addr_len, const char *shown, int port, int *fd_out,
                               mr_error *err)
{
    *fd_out = -1;
    int fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "cannot listen on %s:%d: cannot create a socket", shown, port);
    int on = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    if (addr->sa_family == AF_INET6) (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof(on));
    if (bind(fd, addr, addr_len) != 0 || listen(fd, SOMAXCONN) != 0) {
        int e = errno;
        close(fd);
        if (e == EADDRINUSE) {
            MR_ERR(err, MR_E_IO, "cannot listen on %s:%d: port %d is already in use", shown, port, port);
            mr_error_hint(err,
                          "another process listens on %s:%d; stop it, or give --port another number (0 picks a free one)",
                          shown, port);
            return MR_E_IO;
        }
        if (e == EADDRNOTAVAIL) {
            MR_ERR(err, MR_E_IO, "cannot listen on %s:%d: no interface of this machine has the address %s", shown, port,
                   shown);
            return MR_E_IO;
        }
        return MR_ERR_SYS(err, MR_E_IO, e, "cannot listen on %s:%d", shown, port);
    }
    *fd_out = fd;
    return MR_OK;
}

static void server_free(mr_server *s)
{
    while (s->old) {
        retired *r = s->old;
        s->old = r->next;
        mr_bundle_free(r->b);
        mr_free(r);
    }
    mr_bundle_free(s->cur);
    mr_free(s->batch);
    mr_free(s->bundle_path);
    mr_free(s->host);
    mr_free(s->token);
    pthread_mutex_destroy(&s->mu);
    pthread_mutex_destroy(&s->stats_mu);
    pthread_cond_destroy(&s->work_cv);
    pthread_cond_destroy(&s->idle_cv);
    mr_free(s);
}

mr_status mr_server_start(const mr_server_opts *o, mr_server **out, mr_error *err)
{
    *out = NULL;
    if (!o->bundle_path) return MR_ERR(err, MR_E_INVALID_ARG, "no bundle to serve");
    if (o->max_batch < 1 || o->max_queue < 1 || o->max_body < 16)
        return MR_ERR(err, MR_E_INVALID_ARG, "max batch, queue and body must be positive");
    if (o->port < 0 || o->port > 65535) return MR_ERR(err, MR_E_INVALID_ARG, "--port %d out of range", o->port);
    struct sockaddr_in addr4;
    struct sockaddr_in6 addr6;
    memset(&addr4, 0, sizeof(addr4));
    memset(&addr6, 0, sizeof(addr6));
    const char *host = o->host ? o->host : "127.0.0.1";
    if (!strcmp(host, "localhost")) host = "127.0.0.1";
    int v6 = 0;
    if (inet_pton(AF_INET, host, &addr4.sin_addr) == 1) {
        addr4.sin_family = AF_INET;
        addr4.sin_port = htons((uint16_t)o->port);
    } else {
        /* an IPv6 literal, bare or in brackets ("::1", "[::1]") */
        char h6[INET6_ADDRSTRLEN + 2];
        size_t hl = strlen(host);
        if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']' && hl - 2 < sizeof(h6)) {
            memcpy(h6, host + 1, hl - 2);
            h6[hl - 2] = '\0';
        } else {
            snprintf(h6, sizeof(h6), "%s", hl < sizeof(h6) ? host : "");
        }
        if (inet_pton(AF_INET6, h6, &addr6.sin6_addr) != 1)
            return MR_ERR(err, MR_E_INVALID_ARG, "--host '%s' is not an IPv4 or IPv6 address", host);
        addr6.sin6_family = AF_INET6;
        addr6.sin6_port = htons((uint16_t)o->port);
        v6 = 1;
    }
    mr_server *s = mr_calloc(1, sizeof(*s));
    if (!s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    s->o = *o;
    pthread_mutex_init(&s->mu, NULL);
    pthread_mutex_init(&s->stats_mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->work_cv, &ca);
    pthread_cond_init(&s->idle_cv, &ca);
    pthread_condattr_destroy(&ca);
    s->bundle_path = mr_strdup(o->bundle_path);
    s->host = mr_strdup(host);
    s->token = o->token ? mr_strdup(o->token) : NULL;
    s->batch = mr_calloc((o->max_batch < 4096 ? o->max_batch : 4096) + 1, sizeof(job *));
    if (!s->bundle_path || !s->host || (o->token && !s->token) || !s->batch) {
        server_free(s);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    s->o.bundle_path = s->bundle_path;
    s->o.host = s->host;
    s->o.token = s->token;
    mr_status rc = mr_bundle_load(s->bundle_path, &s->cur, err);
    if (rc != MR_OK) {
        server_free(s);
        return rc;
    }
    memcpy(s->version, mr_bundle_version_id(s->cur), sizeof(s->version));
    if (pthread_create(&s->batcher, NULL, batcher_main, s) != 0) {
        server_free(s);
        return MR_ERR(err, MR_E_INTERNAL, "cannot start the batcher thread");
    }
    s->batcher_started = 1;
    /* A pool of event-loop threads (epoll on Linux), one per core up to 4
     * unless http_threads says otherwise; handlers never block (see top). */
    unsigned pool = o->http_threads;
    if (pool == 0) {
        long nc = sysconf(_SC_NPROCESSORS_ONLN);
        pool = nc < 1 ? 1 : nc > 4 ? 4 : (unsigned)nc;
    }
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_ERROR_LOG;
    if (v6) flags |= MHD_USE_IPv6;
    /* a pool of 1 is the daemon's own polling thread (libmicrohttpd warns
     * about a pool size below 2, so the option is left out then) */
    struct MHD_OptionItem pool_opt[2] = {{MHD_OPTION_THREAD_POOL_SIZE, (intptr_t)pool, NULL}, {MHD_OPTION_END, 0, NULL}};
    if (pool < 2) pool_opt[0].option = MHD_OPTION_END;
    char addr_txt[INET6_ADDRSTRLEN] = "", shown[INET6_ADDRSTRLEN + 2];
    if (v6) inet_ntop(AF_INET6, &addr6.sin6_addr, addr_txt, sizeof(addr_txt));
    else inet_ntop(AF_INET, &addr4.sin_addr, addr_txt, sizeof(addr_txt));
    snprintf(shown, sizeof(shown), v6 ? "[%s]" : "%s", addr_txt);
    int fd = -1;
    rc = v6 ? listen_socket((struct sockaddr *)&addr6, sizeof(addr6), shown, o->port, &fd, err)
            : listen_socket((struct sockaddr *)&addr4, sizeof(addr4), shown, o->port, &fd, err);
    if (rc == MR_OK)
        s->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_ARRAY, pool_opt, MHD_OPTION_CONNECTION_LIMIT,
                                (unsigned)(o->max_connections ? o->max_connections : 512), MHD_OPTION_CONNECTION_TIMEOUT,
                                (unsigned)30, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16 * 1024,
                                MHD_OPTION_NOTIFY_COMPLETED, on_completed, s, MHD_OPTION_END);
    if (!s->d) {
        int e = errno;
        /* A started daemon owns the socket (MHD_stop_daemon closes it); one
         * that failed to start may have closed it already. */
        if (fd >= 0 && fcntl(fd, F_GETFD) != -1) close(fd);
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

mr_status mr_server_reload(mr_server *s, mr_error *err)
{
    mr_bundle *nb = NULL;
    mr_status rc = mr_bundle_load(s->bundle_path, &nb, err);
    if (rc != MR_OK) return rc;
    retired *r = mr_calloc(1, sizeof(*r));
    if (!r) {
        mr_bundle_free(nb);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    pthread_mutex_lock(&s->mu);
    r->b = s->cur;
    r->next = s->old;
    s->old = r;
    s->cur = nb;
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
    MHD_stop_daemon(s->d);
    server_free(s);
}
