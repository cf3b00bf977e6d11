/* millrace serve BUNDLE and millrace bench-serve BUNDLE: the HTTP model
 * server (SIGHUP or --watch reloads the bundle; SIGINT/SIGTERM drain and
 * stop) and its built-in load test against an in-process server. */
#include "cli.h"
#include "millrace/bundle.h"
#include "millrace/serve.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <jansson.h>
#include <math.h>

static const char serve_help[] =
    "usage: millrace serve BUNDLE [options]\n"
    "\n"
    "Serves BUNDLE over HTTP/1.1: POST /v1/predict ({\"rows\": [{...}]} or {\"columns\": {...}}),\n"
    "GET /v1/model, /healthz, /readyz, /metrics (Prometheus). SIGHUP reloads the bundle\n"
    "without failing a request; SIGINT/SIGTERM answer what is queued, then stop.\n"
    "BUNDLE is a file or a registry URI: models:/NAME@ALIAS follows the alias, and\n"
    "models:/NAME the latest version, reloading within half a second when it moves;\n"
    "models:/NAME/VERSION is that version (millrace model --help).\n"
    "\n"
    "options:\n"
    "  --host ADDR          IPv4 or IPv6 address to bind (default 127.0.0.1; \"::1\", \"::\", \"0.0.0.0\")\n"
    "  --port N             port (default 8080; 0 = any free port)\n"
    "  --port-file FILE     write the bound port to FILE once listening\n"
    "  --max-batch N        rows per micro-batch (default 256; 1 = no batching)\n"
    "  --max-delay-us U     how long a request may wait for a batch to fill (default 200)\n"
    "  --max-body BYTES     request body limit, 413 beyond (default 1048576)\n"
    "  --max-queue N        queued requests, 503 + Retry-After beyond (default 1024)\n"
    "  --max-rows N         rows per request, 413 beyond (default 10000)\n"
    "  --max-inflight-bytes BYTES  memory all requests in flight may hold (bodies, then their\n"
    "                       parsed JSON), 503 + Retry-After beyond (default 67108864)\n"
    "  --max-connections N  open connections (default 512); idle ones may hold 3/4 of them\n"
    "  --idle-timeout S     close a connection that sends no complete request headers for S s (default 30)\n"
    "  --request-timeout S  close a request whose body is not in S s after its headers (default 30)\n"
    "  --token-file FILE    require `Authorization: Bearer <first line of FILE>`\n"
    "  --store PATH         the online store of a model packaged with online: (default: the store it\n"
    "                       was packaged with; once per store, in the bundle's order, for several);\n"
    "                       /v1/predict rows then carry the entity keys, and GET /v1/features?KEY=...\n"
    "                       returns an entity's stored features\n"
    "  --watch              reload when the bundle file changes\n"
    "  --strict             answer 422 to a request with a lenient input (a category the training data\n"
    "                       did not have, a value out of its range, a float for an integer column, a\n"
    "                       field that is no input) instead of scoring it; counted either way (/metrics)\n"
    "  -j, --threads N      prediction threads for large batches (default: all cores)\n"
    "  --http-threads N     event-loop threads serving connections (default: one per core, at most 4)\n";

static volatile sig_atomic_t g_stop, g_reload;
static void on_stop(int sig)
{
    (void)sig;
    g_stop = 1;
}
static void on_hup(int sig)
{
    (void)sig;
    g_reload = 1;
}

static int parse_size(const char *v, size_t *out)
{
    char *end = NULL;
    errno = 0;
    unsigned long long x = v ? strtoull(v, &end, 10) : 0;
    if (!v || errno || !end || *end || v[0] == '-') return 0;
    *out = (size_t)x;
    return 1;
}

/* Shared options of serve and bench-serve. Returns 1 consumed (advancing *i), 0 not ours, -1 error. */
static int server_opt(mr_server_opts *o, int argc, char **argv, int *i, const char *verb)
{
    const char *a = argv[*i], *v = *i + 1 < argc ? argv[*i + 1] : NULL;
    size_t n = 0;
    if (!strcmp(a, "--store")) { /* an online store of a model served by entity id (repeatable, in order) */
        static const char *stores[16];
        if (!v || o->n_store_paths == 16) {
            cli_usage_error(verb, !v ? "--store needs a path or redis://HOST:PORT/NAMESPACE" : "at most 16 --store");
            return -1;
        }
        stores[o->n_store_paths++] = argv[++*i];
        o->store_paths = stores;
        return 1;
    }
    if (strcmp(a, "--max-batch") && strcmp(a, "--max-delay-us") && strcmp(a, "--max-body") && strcmp(a, "--max-queue") &&
        strcmp(a, "--max-rows") && strcmp(a, "-j") && strcmp(a, "--threads") && strcmp(a, "--http-threads") &&
        strcmp(a, "--max-connections") && strcmp(a, "--max-inflight-bytes") && strcmp(a, "--idle-timeout") &&
        strcmp(a, "--request-timeout"))
        return 0;
    if (!parse_size(v, &n) || n > (size_t)1 << 40) {
        cli_usage_error(verb, "%s needs a non-negative number", a);
        return -1;
    }
    int timeout = !strcmp(a, "--idle-timeout") || !strcmp(a, "--request-timeout");
    if ((timeout && (n < 1 || n > 86400)) || (!strcmp(a, "--max-connections") && (n < 2 || n > 65536))) {
        cli_usage_error(verb, "%s takes %s", a, timeout ? "1..86400 seconds" : "2..65536");
        return -1;
    }
    if (!strcmp(a, "--max-batch")) o->max_batch = n;
    else if (!strcmp(a, "--max-delay-us")) o->max_delay_us = (unsigned)(n > 10000000 ? 10000000 : n);
    else if (!strcmp(a, "--max-body")) o->max_body = n;
    else if (!strcmp(a, "--max-queue")) o->max_queue = n;
    else if (!strcmp(a, "--max-rows")) o->max_rows = n;
    else if (!strcmp(a, "--http-threads")) o->http_threads = (unsigned)(n > 64 ? 64 : n);
    else if (!strcmp(a, "--max-connections")) o->max_connections = (unsigned)n;
    else if (!strcmp(a, "--max-inflight-bytes")) o->max_inflight_bytes = n;
    else if (!strcmp(a, "--idle-timeout")) o->idle_timeout_s = (unsigned)n;
    else if (!strcmp(a, "--request-timeout")) o->request_timeout_s = (unsigned)n;
    else o->threads = (int)(n > 1024 ? 1024 : n);
    (*i)++;
    return 1;
}

static char *read_token(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    mr_error err;
    mr_error_init(&err);
    if (mr_fs_read_file(path, 4096, &data, &len, &err) != MR_OK) {
        mr_log_error(&err);
        return NULL;
    }
    data[strcspn(data, "\r\n")] = '\0';
    if (!data[0]) {
        fprintf(stderr, "millrace: error: %s: the token file is empty\n", path);
        mr_free(data);
        return NULL;
    }
    return data;
}

int cmd_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(serve_help, stdout);
        return EXIT_OK;
    }
    mr_server_opts o;
    mr_server_opts_init(&o);
    o.port = 8080;
    const char *port_file = NULL, *token_file = NULL;
    int watch = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = server_opt(&o, argc, argv, &i, "serve");
        if (r < 0) return EXIT_USAGE;
        if (r) continue;
        if (!strcmp(a, "--host") && v) o.host = argv[++i];
        else if (!strcmp(a, "--port") && v) {
            size_t p = 0;
            if (!parse_size(v, &p) || p > 65535) return cli_usage_error("serve", "--port takes 0..65535");
            o.port = (int)p;
            i++;
        } else if (!strcmp(a, "--port-file") && v) port_file = argv[++i];
        else if (!strcmp(a, "--token-file") && v) token_file = argv[++i];
        else if (!strcmp(a, "--watch")) watch = 1;
        else if (!strcmp(a, "--strict")) o.strict = 1;
        else if (a[0] != '-' && !o.bundle_path) o.bundle_path = a;
        else return cli_usage_error("serve", "unexpected argument '%s'", a);
    }
    if (!o.bundle_path) return cli_usage_error("serve", "expected BUNDLE");
    mr_error err;
    mr_error_init(&err);
    /* A registry URI: serve its version's bundle from the store, and follow
     * the alias (or the latest version) as it moves. */
    const char *uri = mr_registry_is_uri(o.bundle_path) ? o.bundle_path : NULL;
    mr_workspace *ws = NULL;
    mr_model_version *mv = NULL;
    if (uri && (mr_workspace_open(".", 1, 0, &ws, &err) != MR_OK || mr_registry_get(ws, uri, &mv, &err) != MR_OK)) {
        mr_log_error(&err);
        mr_workspace_close(ws);
        return EXIT_USAGE;
    }
    if (mv) o.bundle_path = mv->path;
    char *token = token_file ? read_token(token_file) : NULL;
    if (token_file && !token) {
        mr_model_version_free(mv);
        mr_workspace_close(ws);
        return EXIT_USAGE;
    }
    o.token = token;
    mr_pool_init(o.threads, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sa.sa_handler = on_hup;
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    mr_server *s = NULL;
    mr_status rc = mr_server_start(&o, &s, &err);
    if (rc != MR_OK) {
        mr_log_error(&err);
        mr_free(token);
        mr_model_version_free(mv);
        mr_workspace_close(ws);
        return rc == MR_E_INVALID_ARG ? EXIT_USAGE : EXIT_FAILED;
    }
    int v6 = strchr(o.host, ':') != NULL && o.host[0] != '[';
    char label[256];
    if (mv)
        snprintf(label, sizeof(label), "%s = %s version %lld", uri, mv->name, (long long)mv->version);
    else
        snprintf(label, sizeof(label), "%s", o.bundle_path);
    printf("serving %s (version %s) on http://%s%s%s:%d  [max batch %zu, max delay %u us%s]\n", cli_safe(label),
           mr_server_model_version(s), v6 ? "[" : "", o.host, v6 ? "]" : "", mr_server_port(s), o.max_batch, o.max_delay_us, token ? ", token" : "");
    fflush(stdout);
    if (port_file) {
        char pb[16];
        int n = snprintf(pb, sizeof(pb), "%d\n", mr_server_port(s));
        mr_fs_write_atomic(port_file, pb, (size_t)n, NULL);
    }
    struct stat st0;
    int have0 = stat(o.bundle_path, &st0) == 0;
    unsigned ticks = 0;
    while (!g_stop) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL); /* signals interrupt it; the flags are checked every 100 ms at worst */
        int reload = g_reload;
        if (mv && (reload || ++ticks % 5 == 0)) { /* where the URI points now: one indexed query, twice a second */
            mr_model_version *nv = NULL;
            mr_error e;
            mr_error_init(&e);
            if (mr_registry_get(ws, uri, &nv, &e) != MR_OK) {
                if (reload) mr_log_error(&e); /* a transient failure (a locked store) just waits for the next look */
                reload = 0;
            } else if (nv->version != mv->version || reload) {
                mr_error_clear(&err);
                if (mr_server_reload_path(s, nv->path, &err) != MR_OK) {
                    mr_log(MR_LOG_WARN, "%s moved to version %lld, which does not load: still serving version %lld",
                           cli_safe(uri), (long long)nv->version, (long long)mv->version);
                    mr_log_error(&err);
                } else {
                    printf("%s: now %s version %lld (bundle version %s)\n", cli_safe(uri), nv->name,
                           (long long)nv->version, mr_server_model_version(s));
                    fflush(stdout);
                }
                /* a version that does not load is not retried until the URI moves again (or SIGHUP) */
                mr_model_version_free(mv);
                mv = nv;
                nv = NULL;
                o.bundle_path = mv->path;
                reload = 0;
                g_reload = 0;
            }
            mr_model_version_free(nv);
            if (!reload) continue;
        }
        if (watch && !mv) {
            struct stat st1;
            if (stat(o.bundle_path, &st1) == 0 &&
                (!have0 || st1.st_ino != st0.st_ino || st1.st_size != st0.st_size ||
                 st1.st_mtim.tv_sec != st0.st_mtim.tv_sec || st1.st_mtim.tv_nsec != st0.st_mtim.tv_nsec)) {
                st0 = st1;
                have0 = 1;
                reload = 1;
            }
        }
        if (!reload) continue;
        g_reload = 0;
        mr_error_clear(&err);
        if (mr_server_reload(s, &err) != MR_OK) {
            mr_log(MR_LOG_WARN, "reload failed, still serving the previous bundle");
            mr_log_error(&err);
        } else {
            printf("reloaded %s (version %s)\n", o.bundle_path, mr_server_model_version(s));
            fflush(stdout);
        }
    }
    printf("shutting down: answering queued requests\n");
    fflush(stdout);
    mr_server_stop(s);
    mr_free(token);
    mr_model_version_free(mv);
    mr_workspace_close(ws);
    return EXIT_OK;
}

static const char bench_help[] =
    "usage: millrace bench-serve BUNDLE --qps N --duration S [options]\n"
    "\n"
    "Starts the server in-process on 127.0.0.1 (or drives one already listening there, --port)\n"
    "with single-row requests over keep-alive connections; prints p50/p90/p99/max latency and\n"
    "achieved QPS. --qps 0 sends back to back (maximum sustained throughput).\n"
    "\n"
    "options:\n"
    "  --qps N              target requests per second (0 = as fast as possible)\n"
    "  --duration S         seconds of load (default 5)\n"
    "  --connections C      keep-alive connections (default 8)\n"
    "  --row JSON           the row to send (default: built from the input schema)\n"
    "  --body JSON          the whole /v1/predict body to send instead ({\"rows\": [...]}: batches, rows by\n"
    "                       entity id)\n"
    "  --store PATH         the online store of a model served by entity id (as for serve)\n"
    "  --port N             drive the server listening on 127.0.0.1:N instead of starting one\n"
    "  --token-file FILE    send `Authorization: Bearer <first line of FILE>`\n"
    "  --malformed F        share of requests sent malformed (0..1; each should get a 4xx)\n"
    "  --slow F             share sent slowly: head, pause, half the body, pause, the rest\n"
    "  --slow-pause S       the two pauses together (default 0.5, at most 4)\n"
    "  --max-batch N, --max-delay-us U, --max-queue N, -j N, --http-threads N   server settings as for serve\n"
    "  --floor              the server answers /v1/predict with one constant response, without parsing\n"
    "                       or predicting: the floor of the design, to divide by (bench/serve vs_floor)\n"
    "  --json               print the result as JSON\n";

/* A plausible row from the schema: numbers 0.5, categories "a" / 1 / true. */
static char *sample_row(const mr_bundle *b)
{
    json_t *row = json_object();
    for (size_t i = 0; i < mr_bundle_n_inputs(b); i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        json_t *v = !in->categorical              ? json_real(0.5)
                    : in->type == MR_T_INT64      ? json_integer(1)
                    : in->type == MR_T_BOOL       ? json_true()
                                                  : json_string("a");
        json_object_set_new(row, in->name, v);
    }
    char *t = json_dumps(row, JSON_COMPACT);
    json_decref(row);
    return t;
}

int cmd_bench_serve(int argc, char **argv)
{
    if (cli_wants_help(argc, argv)) {
        fputs(bench_help, stdout);
        return EXIT_OK;
    }
    mr_server_opts o;
    mr_server_opts_init(&o);
    o.port = 0;
    o.max_queue = 100000;
    mr_loadgen_opts lo;
    mr_loadgen_opts_init(&lo);
    const char *row = NULL, *token_file = NULL, *whole_body = NULL;
    int json = 0, have_qps = 0, server_opts = 0, port = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int r = server_opt(&o, argc, argv, &i, "bench-serve");
        if (r < 0) return EXIT_USAGE;
        if (r) {
            server_opts = 1;
            continue;
        }
        char *end = NULL;
        if ((!strcmp(a, "--qps") || !strcmp(a, "--duration") || !strcmp(a, "--connections") || !strcmp(a, "--malformed") ||
             !strcmp(a, "--slow") || !strcmp(a, "--slow-pause") || !strcmp(a, "--port")) &&
            v) {
            double d = strtod(v, &end);
            if (!end || *end || !(d >= 0) || isinf(d)) return cli_usage_error("bench-serve", "%s takes a non-negative number", a);
            if (!strcmp(a, "--qps")) {
                lo.qps = d;
                have_qps = 1;
            } else if (!strcmp(a, "--duration")) lo.duration_s = d;
            else if (!strcmp(a, "--malformed") || !strcmp(a, "--slow")) {
                if (d > 1) return cli_usage_error("bench-serve", "%s takes a share, 0..1", a);
                if (!strcmp(a, "--slow")) lo.slow_fraction = d;
                else lo.malformed_fraction = d;
            } else if (!strcmp(a, "--slow-pause")) {
                if (d > 4) return cli_usage_error("bench-serve", "--slow-pause takes 0..4 seconds");
                lo.slow_pause_s = d;
            } else if (!strcmp(a, "--port")) {
                if (d < 1 || d > 65535 || d != (double)(int)d) return cli_usage_error("bench-serve", "--port takes 1..65535");
                port = (int)d;
            } else if (d >= 1 && d <= 1024 && d == (double)(int)d) lo.connections = (int)d;
            else return cli_usage_error("bench-serve", "--connections takes a whole number in 1..1024");
            i++;
        } else if (!strcmp(a, "--row") && v) row = argv[++i];
        else if (!strcmp(a, "--body") && v) whole_body = argv[++i];
        else if (!strcmp(a, "--token-file") && v) token_file = argv[++i];
        else if (!strcmp(a, "--json")) json = 1;
        else if (!strcmp(a, "--floor")) {
            o.constant_response = 1;
            server_opts = 1;
        } else if (a[0] != '-' && !o.bundle_path) o.bundle_path = a;
        else return cli_usage_error("bench-serve", "unexpected argument '%s'", a);
    }
    if (!o.bundle_path || !have_qps) return cli_usage_error("bench-serve", "expected BUNDLE --qps N --duration S");
    if (lo.malformed_fraction + lo.slow_fraction > 1)
        return cli_usage_error("bench-serve", "--malformed and --slow together take at most all requests");
    if (port && server_opts)
        return cli_usage_error("bench-serve", "--port drives a running server: its settings are that server's");
    char *resolved = NULL; /* a models:/ URI: its version's bundle file */
    int rrc = cli_resolve_bundle(o.bundle_path, &resolved);
    if (rrc != EXIT_OK) return rrc;
    o.bundle_path = resolved;
    char *token = token_file ? read_token(token_file) : NULL;
    if (token_file && !token) {
        mr_free(resolved);
        return EXIT_USAGE;
    }
    o.token = token;
    lo.token = token;
    signal(SIGPIPE, SIG_IGN);
    mr_error err;
    mr_error_init(&err);
    mr_pool_init(o.threads, NULL);
    mr_server *s = NULL;
    if (!port && mr_server_start(&o, &s, &err) != MR_OK) {
        mr_log_error(&err);
        mr_free(token);
        mr_free(resolved);
        return EXIT_FAILED;
    }
    char *auto_row = NULL, *body = NULL;
    if (!row && !whole_body) {
        mr_bundle *b = NULL;
        if (mr_bundle_load(o.bundle_path, &b, &err) == MR_OK) auto_row = sample_row(b);
        mr_bundle_free(b);
        row = auto_row ? auto_row : "{}";
    }
    body = whole_body ? mr_strdup(whole_body) : mr_asprintf("{\"rows\": [%s]}", row);
    lo.port = s ? mr_server_port(s) : port;
    lo.body = body;
    mr_loadgen_result res;
    mr_status st = body ? mr_loadgen_run(&lo, &res, &err) : MR_ERR(&err, MR_E_NOMEM, "out of memory");
    mr_server_stop(s);
    int rc = EXIT_OK;
    if (st != MR_OK) {
        mr_log_error(&err);
        rc = EXIT_FAILED;
    } else if (json) {
        printf("{\"target_qps\": %.1f, \"achieved_qps\": %.1f, \"sent\": %llu, \"ok\": %llu, \"non_2xx\": %llu, "
               "\"errors\": %llu, \"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"max_ms\": %.4f, "
               "\"malformed_sent\": %llu, \"malformed_4xx\": %llu, \"slow_sent\": %llu, \"slow_ok\": %llu, "
               "\"max_batch\": %zu, \"max_delay_us\": %u, \"connections\": %d}\n",
               lo.qps, res.achieved_qps, (unsigned long long)res.sent, (unsigned long long)res.ok,
               (unsigned long long)res.non_2xx, (unsigned long long)res.errors, res.p50_ms, res.p90_ms, res.p99_ms,
               res.max_ms, (unsigned long long)res.malformed_sent, (unsigned long long)res.malformed_4xx,
               (unsigned long long)res.slow_sent, (unsigned long long)res.slow_ok, o.max_batch, o.max_delay_us,
               lo.connections);
    } else {
        printf("bench-serve: %d connections, target %s qps, %.1fs, max batch %zu, max delay %u us\n", lo.connections,
               lo.qps > 0 ? "" : "max", res.elapsed_s, o.max_batch, o.max_delay_us);
        if (lo.qps > 0) printf("  target qps     %.0f\n", lo.qps);
        printf("  achieved qps   %.0f\n  requests       %llu ok, %llu non-2xx, %llu errors\n"
               "  latency ms     p50 %.3f  p90 %.3f  p99 %.3f  max %.3f\n",
               res.achieved_qps, (unsigned long long)res.ok, (unsigned long long)res.non_2xx,
               (unsigned long long)res.errors, res.p50_ms, res.p90_ms, res.p99_ms, res.max_ms);
        if (res.malformed_sent || res.slow_sent)
            printf("  malformed      %llu sent, %llu answered 4xx\n  slow           %llu sent, %llu answered 2xx\n",
                   (unsigned long long)res.malformed_sent, (unsigned long long)res.malformed_4xx,
                   (unsigned long long)res.slow_sent, (unsigned long long)res.slow_ok);
    }
    free(auto_row);
    mr_free(body);
    mr_free(token);
    mr_free(resolved);
    return rc;
}
