/* The load generator behind `millrace bench-serve`: C keep-alive
 * connections driven by ONE thread (the caller's) with non-blocking sockets
 * and a level-triggered epoll set, sending the same POST either on an
 * open-loop schedule or back to back.
 *
 * Open loop (qps > 0): with interval = C / qps, request k of connection i is
 * due at start + interval * i / C + k * interval. Latency is measured from
 * when the request was due, so a slow server cannot hide queueing: a
 * connection whose previous request is still outstanding sends its next one
 * as soon as the response arrives, and that one's latency still counts from
 * its due time. Closed loop (qps = 0): each connection sends its next request
 * as soon as the previous response is in. One request in flight per
 * connection, never pipelined.
 *
 * Bounds: nothing is sent that is due (open loop) or would start (closed
 * loop) at or after the deadline start + duration, nor beyond max_requests in
 * all; a request with no progress for LG_REQ_TIMEOUT_S fails, and whatever
 * is still unanswered LG_REQ_TIMEOUT_S after the deadline fails too, so the
 * run always ends. A connect failure, a write failure, a connection closed
 * mid-response, a malformed response or a timeout counts one error; the
 * connection is closed and the next request reconnects. A keep-alive
 * connection that the server closes while idle is reopened for the next
 * request without counting an error (that is not a failed request).
 *
 * Invariant of the result: sent == ok + non_2xx + errors.
 *
 * Bad and slow requests (the soak of bench/soak): each request, by a
 * seeded generator, is malformed with probability malformed_fraction (the
 * kinds in turn, all framed so that the connection stays in step or is
 * closed by the server's Connection: close) or slow with probability
 * slow_fraction: its head is written, then after slow_pause_s / 2 half of
 * its body, then after as long again the rest (the pauses end at the
 * first sweep after they are due). Neither kind adds to the latency
 * samples, which stay those of the well-formed requests sent whole.
 *
 * Timer: the next due time is usually well under a millisecond away (5000
 * req/s is one due every 200 us), so epoll_wait's millisecond timeout is too
 * coarse. A timerfd in the epoll set, set to the absolute CLOCK_MONOTONIC
 * time of the next wake-up, gives nanosecond resolution, is not stretched by
 * the thread's timer slack (50 us by default for sleeps), and is re-armed
 * only when that time changes: the loop waits with epoll_wait(-1). That is
 * cheaper than epoll_pwait2's timespec timeout, which arms and cancels a
 * kernel timer on every call, i.e. on every response too; on the 2-vCPU VM
 * this was measured on, each of those reprograms the timer hardware, and
 * open-loop runs at 5000 req/s took 20-30% more CPU per request with
 * epoll_pwait2 than with the timerfd. */
#include "millrace/serve.h"

#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define LG_REQ_TIMEOUT_S 5.0    /* no progress on a request for this long: error */
#define LG_SWEEP_S 0.1          /* how often in-flight requests are checked for that */
#define LG_HEAD_MAX 16384       /* response status line + headers must fit */
#define LG_LAT_CAP 4000000u     /* latency samples kept (a uniform reservoir beyond) */
#define LG_EVENTS 64
#define LG_N_BAD 6              /* kinds of malformed request */

void mr_loadgen_opts_init(mr_loadgen_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->path = "/v1/predict";
    o->connections = 8;
    o->duration_s = 5;
    o->slow_pause_s = 0.5;
}

/* ---- response parser ----------------------------------------------------- */

enum { P_HEAD, P_BODY, P_UNTIL_CLOSE, P_CK_SIZE, P_CK_EXT, P_CK_SIZE_LF, P_CK_DATA, P_CK_DATA_CR, P_CK_DATA_LF,
       P_CK_TRAIL_START, P_CK_TRAIL_LINE, P_CK_TRAIL_LF };

typedef struct parser {
    int state;
    int status;      /* of the final response */
    int close_after; /* the connection cannot carry another request */
    size_t hlen;     /* bytes of head in buf */
    uint64_t left;   /* P_BODY / P_CK_DATA: body bytes still to come */
    int ck_digits;   /* P_CK_SIZE: hex digits seen */
    char *buf;       /* LG_HEAD_MAX bytes: the head, then scratch for body bytes */
} parser;

static void parser_reset(parser *p)
{
    p->state = P_HEAD;
    p->status = 0;
    p->close_after = 0;
    p->hlen = 0;
    p->left = 0;
    p->ck_digits = 0;
}

/* Header value [v, e) with surrounding blanks trimmed. */
static void trim(const char **v, const char **e)
{
    while (*v < *e && (**v == ' ' || **v == '\t')) (*v)++;
    while (*e > *v && ((*e)[-1] == ' ' || (*e)[-1] == '\t')) (*e)--;
}

static int has_token(const char *v, const char *e, const char *tok)
{
    size_t n = strlen(tok);
    for (const char *p = v; (size_t)(e - p) >= n; p++)
        if (!strncasecmp(p, tok, n)) return 1;
    return 0;
}

/* Parses the head buf[0, len) (ending in CRLFCRLF) and sets up body framing.
 * Returns 0, or -1 on a malformed head. */
static int parse_head(parser *p, size_t len)
{
    const char *b = p->buf, *end = b + len - 2; /* end: at the final CRLF */
    if (len < 16 || memcmp(b, "HTTP/1.", 7) || (b[7] != '0' && b[7] != '1') || b[8] != ' ') return -1;
    if (b[9] < '1' || b[9] > '5' || b[10] < '0' || b[10] > '9' || b[11] < '0' || b[11] > '9') return -1;
    if (b[12] != ' ' && b[12] != '\r') return -1;
    int status = (b[9] - '0') * 100 + (b[10] - '0') * 10 + (b[11] - '0');
    int http10 = b[7] == '0', chunked = 0, other_te = 0, have_cl = 0, hdr_close = 0, keep_alive = 0;
    uint64_t cl = 0;
    const char *line = memchr(b, '\n', len);
    if (!line) return -1;
    line++;
    while (line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line) + 1);
        if (!eol) return -1;
        const char *le = eol > line && eol[-1] == '\r' ? eol - 1 : eol;
        const char *colon = memchr(line, ':', (size_t)(le - line));
        if (!colon || colon == line) return -1;
        const char *v = colon + 1, *ve = le;
        trim(&v, &ve);
        size_t nl = (size_t)(colon - line);
        if (nl == 14 && !strncasecmp(line, "Content-Length", 14)) {
            if (v == ve) return -1;
            uint64_t x = 0;
            for (const char *q = v; q < ve; q++) {
                if (*q < '0' || *q > '9' || x > (UINT64_MAX - 9) / 10) return -1;
                x = x * 10 + (uint64_t)(*q - '0');
            }
            if (have_cl && x != cl) return -1;
            cl = x;
            have_cl = 1;
        } else if (nl == 17 && !strncasecmp(line, "Transfer-Encoding", 17)) {
            if (has_token(v, ve, "chunked")) chunked = 1;
            else other_te = 1;
        } else if (nl == 10 && !strncasecmp(line, "Connection", 10)) {
            if (has_token(v, ve, "close")) hdr_close = 1;
            if (has_token(v, ve, "keep-alive")) keep_alive = 1;
        }
        line = eol + 1;
    }
    if (status == 101) return -1; /* we never asked to switch protocols */
    p->status = status;
    p->close_after = hdr_close || (http10 && !keep_alive);
    if (status < 200 || status == 204 || status == 304) {
        p->state = P_BODY; /* no body; a 1xx is interim, see feed() */
        p->left = 0;
    } else if (chunked) {
        p->state = P_CK_SIZE;
        p->ck_digits = 0;
        p->left = 0;
    } else if (have_cl && !other_te) {
        p->state = P_BODY;
        p->left = cl;
    } else {
        p->state = P_UNTIL_CLOSE;
        p->close_after = 1;
    }
    return 0;
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Consumes body bytes [s, s + n). Returns 1 when the response is complete
 * (*used = bytes consumed), 0 when it needs more, -1 on malformed chunking. */
static int feed_body(parser *p, const char *s, size_t n, size_t *used)
{
    size_t i = 0;
    while (1) {
        if (p->state == P_BODY || p->state == P_CK_DATA) {
            size_t take = p->left < (uint64_t)(n - i) ? (size_t)p->left : n - i;
            i += take;
            p->left -= take;
            if (p->left) break;
            if (p->state == P_BODY) {
                *used = i;
                return 1;
            }
            p->state = P_CK_DATA_CR;
            continue;
        }
        if (p->state == P_UNTIL_CLOSE) {
            i = n;
            break;
        }
        if (i == n) break;
        char c = s[i++];
        switch (p->state) {
        case P_CK_SIZE: {
            int d = hexval(c);
            if (d >= 0) {
                if (p->left >> 56) return -1;
                p->left = p->left * 16 + (uint64_t)d;
                p->ck_digits++;
            } else if (!p->ck_digits) {
                return -1;
            } else if (c == ';' || c == ' ' || c == '\t') {
                p->state = P_CK_EXT;
            } else if (c == '\r') {
                p->state = P_CK_SIZE_LF;
            } else if (c == '\n') {
                p->state = p->left ? P_CK_DATA : P_CK_TRAIL_START;
            } else {
                return -1;
            }
            break;
        }
        case P_CK_EXT:
            if (c == '\n') p->state = p->left ? P_CK_DATA : P_CK_TRAIL_START;
            break;
        case P_CK_SIZE_LF:
            if (c != '\n') return -1;
            p->state = p->left ? P_CK_DATA : P_CK_TRAIL_START;
            break;
        case P_CK_DATA_CR:
            if (c == '\n') goto next_chunk;
            if (c != '\r') return -1;
            p->state = P_CK_DATA_LF;
            break;
        case P_CK_DATA_LF:
            if (c != '\n') return -1;
        next_chunk:
            p->state = P_CK_SIZE;
            p->ck_digits = 0;
            p->left = 0;
            break;
        case P_CK_TRAIL_START:
            if (c == '\n') {
                *used = i;
                return 1;
            }
            p->state = c == '\r' ? P_CK_TRAIL_LF : P_CK_TRAIL_LINE;
            break;
        case P_CK_TRAIL_LINE:
            if (c == '\n') p->state = P_CK_TRAIL_START;
            break;
        case P_CK_TRAIL_LF:
            if (c != '\n') return -1;
            *used = i;
            return 1;
        default:
            return -1;
        }
    }
    *used = i;
    return 0;
}

/* Takes n new bytes: at p->buf + p->hlen while reading the head (the caller
 * read them there), else anywhere in p->buf. Returns 1 when the response is
 * complete (close_after is set if bytes followed it), 0 when it needs more,
 * -1 on a malformed response. */
static int feed(parser *p, size_t n)
{
    if (p->state != P_HEAD) {
        size_t used;
        int r = feed_body(p, p->buf, n, &used);
        if (r == 1 && used < n) p->close_after = 1; /* unsolicited bytes: the stream is out of step */
        return r;
    }
    size_t from = p->hlen > 3 ? p->hlen - 3 : 0;
    p->hlen += n;
    for (;;) {
        const char *h = NULL;
        for (size_t i = from; i + 4 <= p->hlen; i++)
            if (p->buf[i] == '\r' && !memcmp(p->buf + i, "\r\n\r\n", 4)) {
                h = p->buf + i + 4;
                break;
            }
        if (!h) return p->hlen >= LG_HEAD_MAX ? -1 : 0;
        size_t hl = (size_t)(h - p->buf), rest = p->hlen - hl;
        if (parse_head(p, hl) != 0) return -1;
        if (p->status < 200) { /* interim (100 Continue, 103): the real response follows */
            memmove(p->buf, h, rest);
            parser_reset(p);
            p->hlen = rest;
            from = 0;
            continue;
        }
        size_t used;
        int r = feed_body(p, h, rest, &used);
        if (r == 1 && used < rest) p->close_after = 1;
        return r;
    }
}

/* ---- connections and the schedule ---------------------------------------- */

enum { C_IDLE, C_BUSY, C_DONE };
enum { K_NORMAL, K_BAD, K_SLOW }; /* what the request in flight is */

typedef struct conn {
    int fd;
    int state;    /* C_IDLE: waiting to send (in the heap, or between steps); C_BUSY: request in flight */
    int want_out; /* EPOLLOUT is in the interest set */
    double due;   /* open loop: when this connection's next request is due */
    double t0;    /* latency start of the request in flight */
    double wake;  /* heap key: when to try the next request */
    double last_io;
    size_t woff; /* bytes of the request written */
    int kind;    /* K_* */
    const char *req; /* the request in flight */
    size_t req_len;
    size_t stop_at;   /* write up to here for now (a slow request pauses at its head and mid-body) */
    double resume_at; /* slow: when the next piece is due */
    parser p;
} conn;

typedef struct lg {
    struct sockaddr_storage addr;
    socklen_t addr_len;
    const char *req;
    size_t req_len, head_len; /* the well-formed request; its head (a slow request pauses after it) */
    const char *bad[LG_N_BAD]; /* the malformed requests, sent in turn */
    size_t bad_len[LG_N_BAD];
    uint64_t bad_next;
    double malformed, slow, pause;
    uint64_t kind_rng;  /* picks each request's kind */
    uint64_t malformed_sent, malformed_4xx, slow_sent, slow_ok;
    int ep, tfd;   /* the epoll set; the timerfd in it that wakes the loop */
    double armed;  /* when tfd is set to expire; -1: not armed */
    int open_loop;
    double interval, start, end, hard_stop;
    uint64_t total;
    uint64_t sent, ok, non_2xx, errors;
    int n_busy;
    conn **heap; /* min-heap on wake; each connection at most once */
    int heap_n;
    /* latencies in seconds: all of them up to LG_LAT_CAP, then a uniform reservoir */
    double *lat;
    uint64_t n_lat, cap_lat, seen_lat;
    double max_lat;
    uint64_t rng;
} lg;

static void heap_push(lg *g, conn *c)
{
    int i = g->heap_n++;
    while (i > 0) {
        int up = (i - 1) / 2;
        if (g->heap[up]->wake <= c->wake) break;
        g->heap[i] = g->heap[up];
        i = up;
    }
    g->heap[i] = c;
}

static conn *heap_pop(lg *g)
{
    conn *top = g->heap[0], *last = g->heap[--g->heap_n];
    int i = 0, n = g->heap_n;
    while (1) {
        int k = 2 * i + 1;
        if (k >= n) break;
        if (k + 1 < n && g->heap[k + 1]->wake < g->heap[k]->wake) k++;
        if (last->wake <= g->heap[k]->wake) break;
        g->heap[i] = g->heap[k];
        i = k;
    }
    if (n) g->heap[i] = last;
    return top;
}

static void record_latency(lg *g, double s)
{
    if (s > g->max_lat) g->max_lat = s;
    g->seen_lat++;
    if (g->n_lat == g->cap_lat && g->cap_lat < LG_LAT_CAP && g->cap_lat < g->total) {
        uint64_t nc = g->cap_lat ? g->cap_lat * 2 : 4096;
        if (nc > LG_LAT_CAP) nc = LG_LAT_CAP;
        double *nl = mr_realloc(g->lat, nc * sizeof(double));
        if (nl) {
            g->lat = nl;
            g->cap_lat = nc;
        }
    }
    if (g->n_lat < g->cap_lat) {
        g->lat[g->n_lat++] = s;
        return;
    }
    if (!g->cap_lat) return;
    /* reservoir: keep this sample with probability cap / seen (xorshift64) */
    g->rng ^= g->rng << 13;
    g->rng ^= g->rng >> 7;
    g->rng ^= g->rng << 17;
    uint64_t j = g->rng % g->seen_lat;
    if (j < g->cap_lat) g->lat[j] = s;
}

static void conn_close(conn *c)
{
    if (c->fd >= 0) {
        close(c->fd); /* also leaves the epoll set */
        c->fd = -1;
    }
    c->want_out = 0;
}

/* A non-blocking connect; the first write waits for it (EAGAIN until the
 * handshake is done, then the connect error if it failed). */
static int conn_open(lg *g, conn *c)
{
    int fd = socket(g->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (connect(fd, (const struct sockaddr *)&g->addr, g->addr_len) != 0 && errno != EINPROGRESS) {
        close(fd);
        return -1;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(g->ep, EPOLL_CTL_ADD, fd, &ev) != 0) {
        close(fd);
        return -1;
    }
    c->fd = fd;
    c->want_out = 0;
    return 0;
}

static void set_want_out(lg *g, conn *c, int on)
{
    if (c->want_out == on || c->fd < 0) return;
    struct epoll_event ev = {.events = EPOLLIN | (on ? EPOLLOUT : 0), .data.ptr = c};
    if (epoll_ctl(g->ep, EPOLL_CTL_MOD, c->fd, &ev) == 0) c->want_out = on;
}

/* Writes what it can, up to stop_at. Returns 0 (done, paused or waiting
 * for EPOLLOUT), -1 on failure. */
static int conn_write(lg *g, conn *c, double now)
{
    while (c->woff < c->stop_at) {
        ssize_t n = send(c->fd, c->req + c->woff, c->stop_at - c->woff, MSG_NOSIGNAL);
        if (n > 0) {
            c->woff += (size_t)n;
            c->last_io = now;
        } else if (n < 0 && errno == EINTR) {
            continue;
        } else if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            set_want_out(g, c, 1);
            return 0;
        } else {
            return -1;
        }
    }
    set_want_out(g, c, 0);
    if (c->woff < c->req_len) c->resume_at = now + g->pause / 2; /* a slow request's pause */
    return 0;
}

static double kind_rand(lg *g)
{
    g->kind_rng ^= g->kind_rng << 13;
    g->kind_rng ^= g->kind_rng >> 7;
    g->kind_rng ^= g->kind_rng << 17;
    return (double)(g->kind_rng >> 11) / 9007199254740992.0;
}

/* Picks the next request's kind and bytes. */
static void pick_request(lg *g, conn *c)
{
    double u = g->malformed > 0 || g->slow > 0 ? kind_rand(g) : 1.0;
    c->kind = u < g->malformed ? K_BAD : u < g->malformed + g->slow ? K_SLOW : K_NORMAL;
    if (c->kind == K_BAD) {
        size_t k = (size_t)(g->bad_next++ % LG_N_BAD);
        c->req = g->bad[k];
        c->req_len = g->bad_len[k];
        g->malformed_sent++;
    } else {
        c->req = g->req;
        c->req_len = g->req_len;
        if (c->kind == K_SLOW) g->slow_sent++;
    }
    c->stop_at = c->kind == K_SLOW ? g->head_len : c->req_len;
}

/* The request in flight on c failed (already counted as sent): count the
 * error, drop the connection, and have the next request try again. */
static void conn_fail(lg *g, conn *c, double now)
{
    g->errors++;
    conn_close(c);
    if (c->state == C_BUSY) g->n_busy--;
    c->state = C_IDLE;
    /* open loop: retry at the next due time, unless that is past the
     * deadline (conn_next then retires the connection at once) */
    c->wake = g->open_loop && c->due > now && c->due < g->end ? c->due : now;
    heap_push(g, c);
}

/* Starts c's next request if the schedule and the bounds allow, else parks
 * it in the heap until its due time or marks it done. */
static void conn_next(lg *g, conn *c, double now)
{
    c->state = C_IDLE;
    if (g->sent >= g->total || now >= g->hard_stop) {
        c->state = C_DONE;
        return;
    }
    if (g->open_loop) {
        if (c->due >= g->end) {
            c->state = C_DONE;
            return;
        }
        if (c->due > now) {
            c->wake = c->due;
            heap_push(g, c);
            return;
        }
        c->t0 = c->due;
        c->due += g->interval;
    } else {
        if (now >= g->end) {
            c->state = C_DONE;
            return;
        }
        c->t0 = now;
    }
    g->sent++;
    c->state = C_BUSY;
    g->n_busy++;
    pick_request(g, c);
    c->woff = 0;
    c->last_io = now;
    parser_reset(&c->p);
    if ((c->fd < 0 && conn_open(g, c) != 0) || conn_write(g, c, now) != 0) conn_fail(g, c, now);
}

static void conn_complete(lg *g, conn *c)
{
    double now = mr_now();
    int st = c->p.status;
    if (c->kind == K_NORMAL) record_latency(g, now - c->t0);
    else if (c->kind == K_BAD && st >= 400 && st < 500) g->malformed_4xx++;
    else if (c->kind == K_SLOW && st >= 200 && st < 300) g->slow_ok++;
    if (st >= 200 && st < 300) g->ok++;
    else g->non_2xx++;
    if (c->p.close_after || c->woff < c->req_len) conn_close(c);
    g->n_busy--;
    conn_next(g, c, now);
}

static void conn_read(lg *g, conn *c, double now)
{
    parser *p = &c->p;
    for (;;) {
        char *dst = p->state == P_HEAD ? p->buf + p->hlen : p->buf;
        size_t space = p->state == P_HEAD ? LG_HEAD_MAX - p->hlen : LG_HEAD_MAX;
        ssize_t n = recv(c->fd, dst, space, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
        if (n == 0 && p->state == P_UNTIL_CLOSE) {
            conn_complete(g, c);
            return;
        }
        if (n <= 0) {
            conn_fail(g, c, now);
            return;
        }
        c->last_io = now;
        int r = feed(p, (size_t)n);
        if (r < 0) conn_fail(g, c, now);
        else if (r > 0) conn_complete(g, c);
        return; /* level-triggered: anything left is reported again */
    }
}

static void conn_event(lg *g, conn *c, uint32_t ev, double now)
{
    if (c->fd < 0) return;
    if (c->state != C_BUSY) {
        /* Idle: the server closed the keep-alive connection (or sent bytes
         * nobody asked for). Reopen it for the next request. */
        conn_close(c);
        return;
    }
    if ((ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)) && c->woff < c->stop_at && conn_write(g, c, now) != 0) {
        conn_fail(g, c, now);
        return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) conn_read(g, c, now);
}

/* Fails requests that made no progress for LG_REQ_TIMEOUT_S, and everything
 * in flight once the hard stop has passed. */
static void sweep(lg *g, conn *cs, int C, double now)
{
    for (int i = 0; i < C; i++) {
        conn *c = &cs[i];
        if (c->state != C_BUSY) continue;
        if (now >= g->hard_stop) {
            g->errors++;
            conn_close(c);
            c->state = C_DONE;
            g->n_busy--;
        } else if (c->woff == c->stop_at && c->stop_at < c->req_len && now >= c->resume_at) {
            /* a slow request's next piece: half the body, then the rest */
            size_t half = g->head_len + (c->req_len - g->head_len) / 2;
            c->stop_at = c->stop_at < half ? half : c->req_len;
            c->last_io = now;
            if (conn_write(g, c, now) != 0) conn_fail(g, c, now);
        } else if (now - c->last_io >= LG_REQ_TIMEOUT_S) {
            conn_fail(g, c, now);
        }
    }
}

/* ---- the event loop -------------------------------------------------------- */

static struct timespec to_timespec(double s)
{
    if (s < 0) s = 0;
    struct timespec ts;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec > 999999999) ts.tv_nsec = 999999999;
    return ts;
}

/* Waits for events, or until `until` (mr_now() clock) at the latest. */
static int wait_events(lg *g, struct epoll_event *evs, double until)
{
    if (until <= mr_now()) return epoll_wait(g->ep, evs, LG_EVENTS, 0);
    if (until != g->armed) {
        /* mr_now() reads CLOCK_MONOTONIC, so its value is an absolute time
         * there; re-arming also clears an expiry not yet seen */
        struct itimerspec its = {.it_interval = {0, 0}, .it_value = to_timespec(until)};
        if (its.it_value.tv_sec == 0 && its.it_value.tv_nsec == 0) its.it_value.tv_nsec = 1;
        if (timerfd_settime(g->tfd, TFD_TIMER_ABSTIME, &its, NULL) != 0) return -1;
        g->armed = until;
    }
    return epoll_wait(g->ep, evs, LG_EVENTS, -1);
}

static mr_status run_loop(lg *g, conn *cs, int C, conn **fire, mr_error *err)
{
    struct epoll_event evs[LG_EVENTS];
    double next_sweep = g->start + LG_SWEEP_S;
    mr_status rc = MR_OK;
    for (;;) {
        double now = mr_now();
        /* start every request whose time has come; retries these queue go to
         * the next round, after the pending I/O has been looked at */
        int nf = 0;
        while (g->heap_n && g->heap[0]->wake <= now) fire[nf++] = heap_pop(g);
        for (int i = 0; i < nf; i++) conn_next(g, fire[i], mr_now()); /* fresh: a closed-loop t0 is the send time */
        if (now >= next_sweep) {
            sweep(g, cs, C, now);
            next_sweep = now + LG_SWEEP_S;
            if (next_sweep > g->hard_stop && now < g->hard_stop) next_sweep = g->hard_stop;
        }
        if (!g->n_busy && !g->heap_n) break;
        double until = g->heap_n ? g->heap[0]->wake : next_sweep;
        if (g->n_busy && next_sweep < until) until = next_sweep;
        int n = wait_events(g, evs, until);
        if (n < 0) {
            if (errno == EINTR) continue;
            rc = MR_ERR_SYS(err, MR_E_INTERNAL, errno, "load generator: epoll wait failed");
            break;
        }
        now = mr_now();
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr) { /* the timer: nothing to read, the next arming resets it */
                g->armed = -1;
                continue;
            }
            conn_event(g, evs[i].data.ptr, evs[i].events, now);
        }
    }
    /* an early exit (epoll failure) leaves requests in flight: count them */
    for (int i = 0; i < C; i++)
        if (cs[i].state == C_BUSY) {
            g->errors++;
            cs[i].state = C_DONE;
        }
    return rc;
}

/* Host literal -> address. "localhost" means 127.0.0.1; "[::1]" is accepted
 * for "::1". Names are not resolved (AI_NUMERICHOST). */
static int resolve(const mr_loadgen_opts *o, const char *host, lg *g)
{
    char h[INET6_ADDRSTRLEN + 64];
    size_t n = strlen(host);
    if (n >= 2 && host[0] == '[' && host[n - 1] == ']') {
        host++;
        n -= 2;
    }
    if (!n || n >= sizeof(h)) return -1;
    memcpy(h, host, n);
    h[n] = '\0';
    if (!strcasecmp(h, "localhost")) strcpy(h, "127.0.0.1");
    char port[16];
    snprintf(port, sizeof(port), "%d", o->port);
    struct addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV;
    if (getaddrinfo(h, port, &hints, &res) != 0 || !res) return -1;
    int ok = res->ai_addrlen <= sizeof(g->addr);
    if (ok) {
        memcpy(&g->addr, res->ai_addr, res->ai_addrlen);
        g->addr_len = res->ai_addrlen;
    }
    freeaddrinfo(res);
    return ok ? 0 : -1;
}

static int has_ctl(const char *s)
{
    for (; s && *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

mr_status mr_loadgen_run(const mr_loadgen_opts *o, mr_loadgen_result *out, mr_error *err)
{
    memset(out, 0, sizeof(*out));
    if (o->connections < 1 || o->connections > 1024 || !(o->duration_s > 0) || o->duration_s > 3600 ||
        !(o->qps >= 0) || !isfinite(o->qps))
        return MR_ERR(err, MR_E_INVALID_ARG, "load generator: connections 1..1024, duration 0..3600 s, qps >= 0");
    const char *host = o->host ? o->host : "127.0.0.1", *path = o->path ? o->path : "/v1/predict";
    if (o->port < 1 || o->port > 65535)
        return MR_ERR(err, MR_E_INVALID_ARG, "load generator: port %d out of range", o->port);
    if (has_ctl(host) || has_ctl(path) || has_ctl(o->token) || !*path || strchr(path, ' '))
        return MR_ERR(err, MR_E_INVALID_ARG, "load generator: control characters or spaces in host, path or token");
    if (!(o->malformed_fraction >= 0) || !(o->slow_fraction >= 0) || !(o->malformed_fraction + o->slow_fraction <= 1) ||
        !(o->slow_pause_s >= 0) || !(o->slow_pause_s <= 4))
        return MR_ERR(err, MR_E_INVALID_ARG,
                      "load generator: malformed and slow fractions 0..1 (together at most 1), slow pause 0..4 s");
    lg g;
    memset(&g, 0, sizeof(g));
    g.ep = g.tfd = -1;
    g.armed = -1;
    if (resolve(o, host, &g) != 0)
        return MR_ERR(err, MR_E_INVALID_ARG, "load generator: host '%s' is not an IPv4 or IPv6 address", host);
    uint64_t total = o->max_requests;
    if (!total) {
        double t = o->qps > 0 ? o->qps * o->duration_s * 1.1 + 16 : 10000000.0;
        total = t < 1e15 ? (uint64_t)t : (uint64_t)1e15;
    }
    g.total = total;
    g.open_loop = o->qps > 0;
    int C = o->connections;
    g.interval = g.open_loop ? (double)C / o->qps : 0;
    g.rng = 0x9e3779b97f4a7c15ull;

    mr_buf req;
    mr_buf_init(&req);
    size_t blen = o->body ? strlen(o->body) : 0;
    int v6 = g.addr.ss_family == AF_INET6;
    const char *hh = host[0] == '[' ? host : NULL; /* already bracketed */
    mr_status rc = mr_buf_printf(&req, "POST %s HTTP/1.1\r\nHost: %s%s%s:%d\r\n", path, v6 && !hh ? "[" : "", host,
                                 v6 && !hh ? "]" : "", o->port);
    if (rc == MR_OK)
        rc = mr_buf_printf(&req, "Content-Type: application/json\r\nContent-Length: %zu\r\n", blen);
    if (rc == MR_OK && o->token) rc = mr_buf_printf(&req, "Authorization: Bearer %s\r\n", o->token);
    if (rc == MR_OK) rc = mr_buf_puts(&req, "\r\n");
    g.head_len = req.len;
    if (rc == MR_OK && blen) rc = mr_buf_append(&req, o->body, blen);
    g.req = req.data;
    g.req_len = req.len;
    g.malformed = o->malformed_fraction;
    g.slow = o->slow_fraction;
    g.pause = o->slow_pause_s;
    g.kind_rng = 0x2545f4914f6cdd1dull;
    /* the malformed kinds (see the top); each a complete request */
    mr_buf bad[LG_N_BAD];
    for (int k = 0; k < LG_N_BAD; k++) mr_buf_init(&bad[k]);
    static const char *const bad_body[3] = {"{\"rows\": [{", "{\"nope\": 1}", "{\"rows\": [1, 2]}"};
    mr_buf hdrs; /* Host and Authorization, as in the well-formed request */
    mr_buf_init(&hdrs);
    if (rc == MR_OK)
        rc = mr_buf_printf(&hdrs, "Host: %s%s%s:%d\r\n", v6 && !hh ? "[" : "", host, v6 && !hh ? "]" : "", o->port);
    if (rc == MR_OK && o->token) rc = mr_buf_printf(&hdrs, "Authorization: Bearer %s\r\n", o->token);
    const char *hd = hdrs.data ? hdrs.data : "";
    for (int k = 0; rc == MR_OK && k < 3; k++)
        rc = mr_buf_printf(&bad[k], "POST %s HTTP/1.1\r\n%sContent-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                           path, hd, strlen(bad_body[k]), bad_body[k]);
    if (rc == MR_OK) rc = mr_buf_printf(&bad[3], "GET /v1/no-such-endpoint HTTP/1.1\r\n%s\r\n", hd);
    if (rc == MR_OK) rc = mr_buf_printf(&bad[4], "GET %s HTTP/1.1\r\n%s\r\n", path, hd);
    if (rc == MR_OK)
        rc = mr_buf_printf(&bad[5], "POST %s HTTP/1.1\r\n%sContent-Length: 0\r\nContent-Length: 7\r\n\r\n", path, hd);
    mr_buf_free(&hdrs);
    for (int k = 0; k < LG_N_BAD; k++) {
        g.bad[k] = bad[k].data;
        g.bad_len[k] = bad[k].len;
        if (!bad[k].data && rc == MR_OK) rc = MR_E_NOMEM;
    }

    conn *cs = mr_calloc((size_t)C, sizeof(conn));
    char *bufs = mr_calloc((size_t)C, LG_HEAD_MAX);
    g.heap = mr_calloc((size_t)C, sizeof(conn *));
    conn **fire = mr_calloc((size_t)C, sizeof(conn *));
    if (rc != MR_OK || !req.data || !cs || !bufs || !g.heap || !fire) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    g.ep = epoll_create1(EPOLL_CLOEXEC);
    g.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    struct epoll_event tev = {.events = EPOLLIN, .data.ptr = NULL};
    if (g.ep < 0 || g.tfd < 0 || epoll_ctl(g.ep, EPOLL_CTL_ADD, g.tfd, &tev) != 0) {
        rc = MR_ERR_SYS(err, MR_E_INTERNAL, errno, "load generator: cannot set up epoll and its timer");
        goto done;
    }

    /* connect everything first (a failure here is retried, and counted, at
     * the connection's first request), then start the clock: connect() of
     * hundreds of sockets can take tens of milliseconds on a host with many
     * TIME_WAIT sockets (a soak's earlier windows), which a clock started
     * before would count as the first requests' latency */
    for (int i = 0; i < C; i++) {
        conn *c = &cs[i];
        c->fd = -1;
        c->p.buf = bufs + (size_t)i * LG_HEAD_MAX;
        c->state = C_IDLE;
        if (g.open_loop && g.interval * i / C >= o->duration_s) { /* qps so low that its first request is past the deadline */
            c->state = C_DONE;
            continue;
        }
        (void)conn_open(&g, c);
    }
    g.start = mr_now() + 0.05;
    g.end = g.start + o->duration_s;
    g.hard_stop = g.end + LG_REQ_TIMEOUT_S;
    for (int i = 0; i < C; i++) {
        conn *c = &cs[i];
        c->due = g.start + (g.open_loop ? g.interval * i / C : 0);
        c->wake = c->due;
        if (c->state != C_DONE) heap_push(&g, c);
    }
    rc = run_loop(&g, cs, C, fire, err);
    double elapsed = mr_now() - g.start;
    for (int i = 0; i < C; i++) conn_close(&cs[i]);
    if (rc != MR_OK) goto done;

    out->sent = g.sent;
    out->ok = g.ok;
    out->non_2xx = g.non_2xx;
    out->errors = g.errors;
    out->malformed_sent = g.malformed_sent;
    out->malformed_4xx = g.malformed_4xx;
    out->slow_sent = g.slow_sent;
    out->slow_ok = g.slow_ok;
    uint64_t n = g.n_lat;
    if (n) {
        qsort(g.lat, (size_t)n, sizeof(double), cmp_double);
        out->p50_ms = g.lat[(size_t)(0.50 * (double)(n - 1))] * 1e3;
        out->p90_ms = g.lat[(size_t)(0.90 * (double)(n - 1))] * 1e3;
        out->p99_ms = g.lat[(size_t)(0.99 * (double)(n - 1))] * 1e3;
        out->max_ms = g.max_lat * 1e3;
    }
    out->elapsed_s = elapsed;
    out->achieved_qps = elapsed > 0 ? (double)(out->ok + out->non_2xx) / elapsed : 0;
done:
    if (g.tfd >= 0) close(g.tfd);
    if (g.ep >= 0) close(g.ep);
    mr_free(g.lat);
    mr_free(g.heap);
    mr_free(fire);
    mr_free(bufs);
    mr_free(cs);
    mr_buf_free(&req);
    for (int k = 0; k < LG_N_BAD; k++) mr_buf_free(&bad[k]);
    return rc;
}
