/* Unit tests for the load generator (src/serve/loadgen.c) against a small
 * scripted HTTP server in this file: responses split across reads, chunked
 * bodies, interim 100 responses, Connection: close, close-delimited bodies,
 * non-2xx, malformed and dropped responses (errors, reconnects), an oversized
 * head; the open-loop schedule and the max_requests cap; malformed and slow
 * requests mixed in (each malformed kind refused, each slow one slow and
 * answered); IPv4, IPv6 and "localhost" hosts; bad options rejected without
 * a crash. */
#define _GNU_SOURCE /* strcasestr */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "millrace/serve.h"

enum { M_OK_SPLIT, M_CHUNKED, M_CLOSE, M_503, M_GARBAGE, M_DROP, M_CONTINUE, M_UNTIL_CLOSE, M_BIG_HEAD, M_MUTATED,
       M_JUDGE };

#define JUDGE_BODY "{\"rows\": [{\"a\": 1}]}"

typedef struct srv {
    int fd, port, mode;
    pthread_t th;
    atomic_int stop, live, accepted, requests;
    atomic_int slow_seen; /* M_JUDGE: requests whose bytes took at least 0.45 s to arrive */
    atomic_uint seed;
} srv;

typedef struct cli {
    srv *s;
    int fd;
} cli;

static void pause_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

static int write_all(int fd, const char *p, size_t n, size_t piece)
{
    while (n) {
        size_t k = n < piece ? n : piece;
        ssize_t w = send(fd, p, k, MSG_NOSIGNAL);
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
        if (n && piece < 1000) pause_us(300);
    }
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Reads one request (head + Content-Length body, the first Content-Length)
 * into buf, NUL-terminated; *secs: from its first byte to its last. 0, or
 * -1 at EOF/error. */
static int read_request(int fd, char *buf, size_t cap, double *secs)
{
    size_t len = 0;
    char *end = NULL;
    double t0 = 0;
    while (!end) {
        if (len + 1 >= cap) return -1;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n <= 0) return -1;
        if (!len) t0 = now_s();
        len += (size_t)n;
        buf[len] = '\0';
        end = strstr(buf, "\r\n\r\n");
    }
    const char *cl = strcasestr(buf, "Content-Length:");
    size_t body = cl ? (size_t)strtoul(cl + 15, NULL, 10) : 0;
    size_t have = len - (size_t)(end + 4 - buf);
    while (have < body) {
        if (len + 1 >= cap) return -1;
        ssize_t n = recv(fd, buf + len, cap - 1 - len, 0);
        if (n <= 0) return -1;
        have += (size_t)n;
        len += (size_t)n;
        buf[len] = '\0';
    }
    *secs = now_s() - t0;
    return 0;
}

/* M_JUDGE: the one well-formed request run() sends is a POST of
 * JUDGE_BODY to /v1/predict with one Content-Length. */
static int well_formed(const char *req)
{
    const char *cl = strcasestr(req, "Content-Length:"), *body = strstr(req, "\r\n\r\n");
    return !strncmp(req, "POST /v1/predict ", 17) && cl && !strcasestr(cl + 1, "Content-Length:") && body &&
           !strcmp(body + 4, JUDGE_BODY);
}

static void *client_main(void *arg)
{
    cli *c = arg;
    srv *s = c->s;
    char buf[8192];
    struct timeval tv = {2, 0};
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    int one = 1; /* the split writes must not wait for delayed ACKs */
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    double secs = 0;
    while (read_request(c->fd, buf, sizeof(buf), &secs) == 0) {
        atomic_fetch_add(&s->requests, 1);
        const char *r = NULL;
        size_t piece = 1 << 20;
        int close_after = 0;
        switch (s->mode) {
        case M_JUDGE:
            if (secs >= 0.45) atomic_fetch_add(&s->slow_seen, 1);
            r = well_formed(buf) ? "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
                                 : "HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Length: 3\r\n\r\nbad";
            close_after = !well_formed(buf);
            break;
        case M_OK_SPLIT:
            r = "HTTP/1.1 200 OK\r\nCONTENT-length:  5 \r\nX-A: b\r\n\r\nhello";
            piece = 7;
            break;
        case M_CHUNKED:
            r = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\nA\r\n0123456789\r\n0\r\n"
                "X-Trailer: 1\r\n\r\n";
            piece = 9;
            break;
        case M_CLOSE:
            r = "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\nok";
            close_after = 1;
            break;
        case M_503:
            r = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 4\r\n\r\nbusy";
            break;
        case M_GARBAGE:
            r = "nonsense\r\n\r\n";
            break;
        case M_DROP:
            close_after = 1;
            break;
        case M_CONTINUE:
            r = "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n";
            piece = 20;
            break;
        case M_UNTIL_CLOSE:
            r = "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nbody until close";
            close_after = 1;
            break;
        case M_MUTATED: { /* a valid response with 3 bytes changed, cut short at random */
            static const char *const base[] = {
                "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;e\r\nhello\r\n0\r\nT: 1\r\n\r\n",
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.0 204 No\r\nConnection: keep-alive\r\n\r\n",
            };
            unsigned x = atomic_fetch_add(&s->seed, 2654435761u);
            char m[256];
            const char *b = base[x % 3];
            size_t n = strlen(b);
            memcpy(m, b, n);
            for (int k = 0; k < 3; k++) {
                x = x * 1103515245u + 12345u;
                size_t at = (x >> 8) % n;
                x = x * 1103515245u + 12345u;
                m[at] = "0123456789aF:;\r\n -\xff"[(x >> 8) % 20];
            }
            x = x * 1103515245u + 12345u;
            if (x & 0x100) n = (x >> 9) % n;
            write_all(c->fd, m, n, 5);
            close_after = 1; /* else a mangled length would wait for the 5 s timeout */
            break;
        }
        case M_BIG_HEAD: {
            char big[20000]; /* per thread: connections answer concurrently */
            memset(big, 'a', sizeof(big));
            memcpy(big, "HTTP/1.1 200 OK\r\nX-Big: ", 24);
            memcpy(big + sizeof(big) - 4, "\r\n\r\n", 4);
            if (write_all(c->fd, big, sizeof(big), 1 << 20) != 0) close_after = 1;
            break;
        }
        }
        if (r && write_all(c->fd, r, strlen(r), piece) != 0) break;
        if (close_after) break;
    }
    close(c->fd);
    free(c);
    atomic_fetch_sub(&s->live, 1);
    return NULL;
}

static void *accept_main(void *arg)
{
    srv *s = arg;
    while (!atomic_load(&s->stop)) {
        struct pollfd p = {s->fd, POLLIN, 0};
        if (poll(&p, 1, 20) <= 0) continue;
        int fd = accept(s->fd, NULL, NULL);
        if (fd < 0) continue;
        cli *c = malloc(sizeof(*c));
        pthread_t t;
        if (!c) {
            close(fd);
            continue;
        }
        c->s = s;
        c->fd = fd;
        atomic_fetch_add(&s->live, 1);
        atomic_fetch_add(&s->accepted, 1);
        if (pthread_create(&t, NULL, client_main, c) != 0) {
            atomic_fetch_sub(&s->live, 1);
            close(fd);
            free(c);
            continue;
        }
        pthread_detach(t);
    }
    return NULL;
}

/* Starts a server on the loopback of `family`; returns 0, or -1 if that
 * family cannot be bound here. */
static int srv_start(srv *s, int family, int mode)
{
    memset(s, 0, sizeof(*s));
    s->mode = mode;
    s->fd = socket(family, SOCK_STREAM, 0);
    if (s->fd < 0) return -1;
    int one = 1;
    setsockopt(s->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_storage a;
    socklen_t al;
    memset(&a, 0, sizeof(a));
    if (family == AF_INET6) {
        struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&a;
        a6->sin6_family = AF_INET6;
        a6->sin6_addr = in6addr_loopback;
        al = sizeof(*a6);
    } else {
        struct sockaddr_in *a4 = (struct sockaddr_in *)&a;
        a4->sin_family = AF_INET;
        a4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        al = sizeof(*a4);
    }
    if (bind(s->fd, (struct sockaddr *)&a, al) != 0 || listen(s->fd, 128) != 0 ||
        getsockname(s->fd, (struct sockaddr *)&a, &al) != 0) {
        close(s->fd);
        return -1;
    }
    s->port = ntohs(family == AF_INET6 ? ((struct sockaddr_in6 *)&a)->sin6_port : ((struct sockaddr_in *)&a)->sin_port);
    assert_int_equal(pthread_create(&s->th, NULL, accept_main, s), 0);
    return 0;
}

static void srv_stop(srv *s)
{
    atomic_store(&s->stop, 1);
    pthread_join(s->th, NULL);
    close(s->fd);
    for (int i = 0; i < 500 && atomic_load(&s->live) > 0; i++) pause_us(10000);
    assert_int_equal(atomic_load(&s->live), 0);
}

static mr_loadgen_result run(const srv *s, const char *host, double qps, double secs, int conns, uint64_t max_req)
{
    mr_loadgen_opts o;
    mr_loadgen_opts_init(&o);
    o.host = host;
    o.port = s->port;
    o.body = JUDGE_BODY;
    o.token = "t0k";
    o.qps = qps;
    o.duration_s = secs;
    o.connections = conns;
    o.max_requests = max_req;
    mr_loadgen_result r;
    mr_error err;
    mr_error_init(&err);
    if (mr_loadgen_run(&o, &r, &err) != MR_OK) fail_msg("loadgen: %s", err.msg);
    assert_true(r.sent == r.ok + r.non_2xx + r.errors);
    return r;
}

static mr_loadgen_result run_mode(int mode, double qps, double secs, int conns, uint64_t max_req)
{
    srv s;
    assert_int_equal(srv_start(&s, AF_INET, mode), 0);
    mr_loadgen_result r = run(&s, "127.0.0.1", qps, secs, conns, max_req);
    srv_stop(&s);
    return r;
}

static void test_framings(void **state)
{
    (void)state;
    int good[] = {M_OK_SPLIT, M_CHUNKED, M_CLOSE, M_CONTINUE, M_UNTIL_CLOSE};
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        mr_loadgen_result r = run_mode(good[i], 0, 2.0, 3, 60);
        if (r.errors || r.ok != 60)
            fail_msg("mode %d: sent %llu ok %llu errors %llu", good[i], (unsigned long long)r.sent,
                     (unsigned long long)r.ok, (unsigned long long)r.errors);
        assert_int_equal(r.sent, 60);
        assert_true(r.p50_ms > 0 && r.p50_ms <= r.p90_ms && r.p90_ms <= r.p99_ms && r.p99_ms <= r.max_ms);
    }
    mr_loadgen_result r = run_mode(M_503, 0, 2.0, 2, 30);
    assert_int_equal(r.non_2xx, 30);
    assert_int_equal(r.ok + r.errors, 0);
}

static void test_failures(void **state)
{
    (void)state;
    int bad[] = {M_GARBAGE, M_DROP, M_BIG_HEAD};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        srv s;
        assert_int_equal(srv_start(&s, AF_INET, bad[i]), 0);
        mr_loadgen_result r = run(&s, "127.0.0.1", 0, 2.0, 2, 20);
        srv_stop(&s);
        assert_int_equal(r.sent, 20);
        assert_int_equal(r.errors, 20);
        assert_int_equal(r.ok + r.non_2xx, 0);
        /* every failure drops the connection: each request got a fresh one */
        assert_true(atomic_load(&s.accepted) >= 20);
    }
    /* nobody listening: connect failures are errors, the run still ends */
    srv s;
    assert_int_equal(srv_start(&s, AF_INET, M_OK_SPLIT), 0);
    srv_stop(&s);
    mr_loadgen_result r = run(&s, "127.0.0.1", 0, 0.2, 2, 50);
    assert_int_equal(r.errors, r.sent);
    assert_true(r.sent > 0 && r.sent <= 50);
}

/* Mangled responses: any outcome but a crash, a hang or a miscount. */
static void test_mutated(void **state)
{
    (void)state;
    srv s;
    assert_int_equal(srv_start(&s, AF_INET, M_MUTATED), 0);
    mr_loadgen_result r = run(&s, "127.0.0.1", 0, 3.0, 4, 400);
    srv_stop(&s);
    print_message("mutated responses: %llu ok, %llu non-2xx, %llu errors\n", (unsigned long long)r.ok,
                  (unsigned long long)r.non_2xx, (unsigned long long)r.errors);
    assert_int_equal(r.sent, 400);
}

static void test_open_loop(void **state)
{
    (void)state;
    /* 400 req/s over 4 connections for 0.499 s: connection i's request k is
     * due at 2.5 ms * i + 10 ms * k, so k = 0..49 on each: exactly 200 */
    srv s;
    assert_int_equal(srv_start(&s, AF_INET, M_OK_SPLIT), 0);
    mr_loadgen_result r = run(&s, "127.0.0.1", 400, 0.499, 4, 0);
    assert_int_equal(r.sent, 200);
    assert_int_equal(r.ok, 200);
    assert_int_equal(atomic_load(&s.requests), 200);
    assert_true(r.achieved_qps > 100 && r.achieved_qps < 450);
    /* keep-alive: no more connections than asked for */
    assert_true(atomic_load(&s.accepted) <= 4);
    /* max_requests caps the total even when the schedule wants more */
    r = run(&s, "127.0.0.1", 400, 0.5, 4, 37);
    assert_int_equal(r.sent, 37);
    assert_int_equal(r.ok, 37);
    /* and in the closed loop */
    r = run(&s, "localhost", 0, 2.0, 3, 101);
    assert_int_equal(r.sent, 101);
    assert_int_equal(r.ok, 101);
    srv_stop(&s);
}

static void test_ipv6(void **state)
{
    (void)state;
    srv s;
    /* Only a kernel without an IPv6 loopback excuses this test (as in
     * tests/e2e/test_serve.sh); there, binding ::1 cannot work at all. */
    FILE *f = fopen("/proc/net/if_inet6", "r");
    char line[256];
    int have_lo6 = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "00000000000000000000000000000001 ", 33)) have_lo6 = 1;
    if (f) fclose(f);
    if (!have_lo6) {
        print_message("NOTE: this machine has no IPv6 loopback (::1); the IPv6 load generator test cannot run\n");
        skip();
    }
    assert_int_equal(srv_start(&s, AF_INET6, M_OK_SPLIT), 0);
    mr_loadgen_result r = run(&s, "::1", 0, 2.0, 2, 40);
    assert_int_equal(r.ok, 40);
    r = run(&s, "[::1]", 500, 0.099, 2, 0); /* 25 per connection */
    assert_int_equal(r.ok, 50);
    srv_stop(&s);
}

/* Malformed and slow requests mixed in: every malformed one is a request
 * the judge refuses (each kind framed so the stream stays in step), every
 * slow one takes at least the pause to arrive and is well-formed, and
 * neither disturbs the others. */
static void test_bad_and_slow(void **state)
{
    (void)state;
    srv s;
    assert_int_equal(srv_start(&s, AF_INET, M_JUDGE), 0);
    mr_loadgen_opts o;
    mr_loadgen_opts_init(&o);
    o.host = "127.0.0.1";
    o.port = s.port;
    o.body = JUDGE_BODY;
    o.token = "t0k";
    o.qps = 0;
    o.duration_s = 10;
    o.connections = 8;
    o.max_requests = 600;
    o.malformed_fraction = 0.2;
    o.slow_fraction = 0.02;
    o.slow_pause_s = 0.5;
    mr_loadgen_result r;
    mr_error err;
    mr_error_init(&err);
    if (mr_loadgen_run(&o, &r, &err) != MR_OK) fail_msg("loadgen: %s", err.msg);
    srv_stop(&s);
    print_message("bad and slow: sent %llu, ok %llu, non-2xx %llu, errors %llu, malformed %llu (4xx %llu), slow %llu "
                  "(ok %llu, seen slow %d)\n",
                  (unsigned long long)r.sent, (unsigned long long)r.ok, (unsigned long long)r.non_2xx,
                  (unsigned long long)r.errors, (unsigned long long)r.malformed_sent,
                  (unsigned long long)r.malformed_4xx, (unsigned long long)r.slow_sent, (unsigned long long)r.slow_ok,
                  atomic_load(&s.slow_seen));
    assert_int_equal(r.sent, 600);
    assert_int_equal(r.errors, 0);
    assert_true(r.sent == r.ok + r.non_2xx);
    /* 20% of 600 from a fixed seed: 120 expected; a binomial 3-sigma band */
    assert_in_range(r.malformed_sent, 90, 150);
    assert_int_equal(r.malformed_4xx, r.malformed_sent);
    assert_int_equal(r.non_2xx, r.malformed_sent);
    assert_in_range(r.slow_sent, 2, 30);
    assert_int_equal(r.slow_ok, r.slow_sent);
    assert_true((uint64_t)atomic_load(&s.slow_seen) >= r.slow_sent);
    /* bad options */
    o.malformed_fraction = 0.7;
    o.slow_fraction = 0.4;
    assert_status(mr_loadgen_run(&o, &r, &err), MR_E_INVALID_ARG);
    o.malformed_fraction = 0;
    o.slow_fraction = 0.1;
    o.slow_pause_s = 5;
    assert_status(mr_loadgen_run(&o, &r, &err), MR_E_INVALID_ARG);
}

static void test_bad_options(void **state)
{
    (void)state;
    mr_loadgen_opts o;
    mr_loadgen_result r;
    mr_error err;
    struct {
        const char *host, *path, *token;
        int port, conns;
        double qps, secs;
    } cases[] = {
        {"127.0.0.1", "/", NULL, 0, 1, 1, 1},          {"127.0.0.1", "/", NULL, 70000, 1, 1, 1},
        {"127.0.0.1", "/", NULL, 80, 0, 1, 1},         {"127.0.0.1", "/", NULL, 80, 2000, 1, 1},
        {"127.0.0.1", "/", NULL, 80, 1, -1, 1},        {"127.0.0.1", "/", NULL, 80, 1, NAN, 1},
        {"127.0.0.1", "/", NULL, 80, 1, INFINITY, 1},  {"127.0.0.1", "/", NULL, 80, 1, 1, NAN},
        {"127.0.0.1", "/", NULL, 80, 1, 1, 0},         {"127.0.0.1", "/", NULL, 80, 1, 1, 1e9},
        {"example.com", "/", NULL, 80, 1, 1, 1},       {"", "/", NULL, 80, 1, 1, 1},
        {"1.2.3.4.5", "/", NULL, 80, 1, 1, 1},         {"[::1", "/", NULL, 80, 1, 1, 1},
        {"127.0.0.1", "/a b", NULL, 80, 1, 1, 1},      {"127.0.0.1", "/a\r\nX: y", NULL, 80, 1, 1, 1},
        {"127.0.0.1", "", NULL, 80, 1, 1, 1},          {"127.0.0.1", "/", "t\nX: y", 80, 1, 1, 1},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        mr_loadgen_opts_init(&o);
        o.host = cases[i].host;
        o.path = cases[i].path;
        o.token = cases[i].token;
        o.port = cases[i].port;
        o.connections = cases[i].conns;
        o.qps = cases[i].qps;
        o.duration_s = cases[i].secs;
        mr_error_init(&err);
        if (mr_loadgen_run(&o, &r, &err) != MR_E_INVALID_ARG) fail_msg("case %zu accepted", i);
        assert_int_equal(r.sent, 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framings), cmocka_unit_test(test_failures), cmocka_unit_test(test_mutated),
        cmocka_unit_test(test_open_loop), cmocka_unit_test(test_bad_and_slow),
        cmocka_unit_test(test_ipv6),     cmocka_unit_test(test_bad_options),
    };
    return mr_test_run(tests, NULL, NULL);
}
