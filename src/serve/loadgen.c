/* The load generator behind `millrace bench-serve`: C keep-alive
 * connections on loopback, one thread each, sending the same POST either on
 * an open-loop schedule (qps > 0: request k of a connection is due at
 * start + k * C / qps; latency is measured from when it was due, so a slow
 * server cannot hide queueing) or back to back (qps = 0). Every loop is
 * bounded by the deadline and by max_requests. */
#include "millrace/serve.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

void mr_loadgen_opts_init(mr_loadgen_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->path = "/v1/predict";
    o->connections = 8;
    o->duration_s = 5;
}

typedef struct worker {
    const mr_loadgen_opts *o;
    const char *req;
    size_t req_len;
    int id;
    double start, end;
    uint64_t quota;
    double *lat; /* seconds, one per completed request */
    uint64_t n_lat, cap_lat;
    uint64_t sent, ok, non_2xx, errors;
} worker;

static int connect_to(const mr_loadgen_opts *o)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &a.sin_addr) != 1) return -1;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    struct timeval tv = {5, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads one response; returns its status code, or -1 (connection unusable). */
static int read_response(int fd, char *buf, size_t cap)
{
    size_t len = 0;
    char *hdr_end = NULL;
    while (!hdr_end) {
        if (len >= cap - 1) return -1;
        ssize_t n = read(fd, buf + len, cap - 1 - len);
        if (n <= 0) return -1;
        len += (size_t)n;
        buf[len] = '\0';
        hdr_end = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1) return -1;
    size_t body_len = 0;
    for (char *p = buf; p < hdr_end; p++) {
        if ((*p == 'C' || *p == 'c') && !strncasecmp(p, "Content-Length:", 15)) {
            body_len = (size_t)strtoull(p + 15, NULL, 10);
            break;
        }
    }
    size_t have = len - (size_t)(hdr_end + 4 - buf);
    while (have < body_len) {
        char tmp[4096];
        size_t want = body_len - have < sizeof(tmp) ? body_len - have : sizeof(tmp);
        ssize_t n = read(fd, tmp, want);
        if (n <= 0) return -1;
        have += (size_t)n;
    }
    return status;
}

static void sleep_until(double t)
{
    double d = t - mr_now();
    if (d <= 0) return;
    struct timespec ts = {(time_t)d, (long)((d - (double)(time_t)d) * 1e9)};
    nanosleep(&ts, NULL);
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    const mr_loadgen_opts *o = w->o;
    char *buf = mr_malloc(1 << 16);
    int fd = -1;
    double interval = o->qps > 0 ? (double)o->connections / o->qps : 0;
    double due = w->start + (o->qps > 0 ? interval * w->id / o->connections : 0);
    while (buf && w->sent < w->quota) {
        if (o->qps > 0) {
            if (due >= w->end) break;
            sleep_until(due);
        } else if (mr_now() >= w->end) {
            break;
        }
        double t0 = o->qps > 0 ? due : mr_now();
        due += interval;
        if (fd < 0) fd = connect_to(o);
        if (fd < 0) {
            w->errors++;
            w->sent++;
            continue;
        }
        size_t off = 0;
        int bad = 0;
        while (off < w->req_len) {
            ssize_t n = write(fd, w->req + off, w->req_len - off);
            if (n <= 0) {
                bad = 1;
                break;
            }
            off += (size_t)n;
        }
        w->sent++;
        int st = bad ? -1 : read_response(fd, buf, 1 << 16);
        if (st < 0) {
            w->errors++;
            close(fd);
            fd = -1;
            continue;
        }
        if (st >= 200 && st < 300) w->ok++;
        else w->non_2xx++;
        if (w->n_lat < w->cap_lat) w->lat[w->n_lat++] = mr_now() - t0;
    }
    if (fd >= 0) close(fd);
    mr_free(buf);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

mr_status mr_loadgen_run(const mr_loadgen_opts *o, mr_loadgen_result *out, mr_error *err)
{
    memset(out, 0, sizeof(*out));
    if (o->connections < 1 || o->connections > 1024 || o->duration_s <= 0 || o->duration_s > 3600 || o->qps < 0)
        return MR_ERR(err, MR_E_INVALID_ARG, "load generator: connections 1..1024, duration 0..3600 s, qps >= 0");
    uint64_t total = o->max_requests;
    if (!total) total = o->qps > 0 ? (uint64_t)(o->qps * o->duration_s * 1.1) + 16 : 10000000u;
    mr_buf req;
    mr_buf_init(&req);
    size_t blen = o->body ? strlen(o->body) : 0;
    mr_buf_printf(&req, "POST %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n",
                  o->path, o->host, o->port, blen);
    if (o->token) mr_buf_printf(&req, "Authorization: Bearer %s\r\n", o->token);
    mr_buf_puts(&req, "\r\n");
    if (blen) mr_buf_append(&req, o->body, blen);
    int C = o->connections;
    worker *w = mr_calloc((size_t)C, sizeof(worker));
    pthread_t *th = mr_calloc((size_t)C, sizeof(pthread_t));
    mr_status rc = MR_OK;
    if (!req.data || !w || !th) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    double start = mr_now() + 0.05;
    for (int i = 0; i < C; i++) {
        w[i].o = o;
        w[i].req = req.data;
        w[i].req_len = req.len;
        w[i].id = i;
        w[i].start = start;
        w[i].end = start + o->duration_s;
        w[i].quota = total / (uint64_t)C + 1;
        w[i].cap_lat = w[i].quota < 4000000 ? w[i].quota : 4000000;
        w[i].lat = mr_malloc(w[i].cap_lat * sizeof(double));
        if (!w[i].lat) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            C = i;
            goto join;
        }
    }
    for (int i = 0; i < C; i++)
        if (pthread_create(&th[i], NULL, worker_main, &w[i]) != 0) {
            rc = MR_ERR(err, MR_E_INTERNAL, "cannot start load threads");
            C = i;
            break;
        }
join:
    for (int i = 0; i < C; i++) pthread_join(th[i], NULL);
    if (rc == MR_OK) {
        double elapsed = mr_now() - start;
        uint64_t n = 0;
        for (int i = 0; i < C; i++) {
            out->sent += w[i].sent;
            out->ok += w[i].ok;
            out->non_2xx += w[i].non_2xx;
            out->errors += w[i].errors;
            n += w[i].n_lat;
        }
        double *all = mr_malloc((n ? n : 1) * sizeof(double));
        if (!all) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else {
            size_t at = 0;
            for (int i = 0; i < C; i++) {
                memcpy(all + at, w[i].lat, w[i].n_lat * sizeof(double));
                at += w[i].n_lat;
            }
            qsort(all, n, sizeof(double), cmp_double);
            if (n) {
                out->p50_ms = all[(size_t)(0.50 * (double)(n - 1))] * 1e3;
                out->p90_ms = all[(size_t)(0.90 * (double)(n - 1))] * 1e3;
                out->p99_ms = all[(size_t)(0.99 * (double)(n - 1))] * 1e3;
                out->max_ms = all[n - 1] * 1e3;
            }
            out->elapsed_s = elapsed;
            out->achieved_qps = elapsed > 0 ? (double)(out->ok + out->non_2xx) / elapsed : 0;
            mr_free(all);
        }
    }
    for (int i = 0; w && i < o->connections; i++) mr_free(w[i].lat);
done:
    mr_free(w);
    mr_free(th);
    mr_buf_free(&req);
    return rc;
}
