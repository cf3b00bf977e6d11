/* Bench helper (not installed): drives a server already listening on
 * 127.0.0.1:PORT with the load generator of `millrace bench-serve`
 * (mr_loadgen_run), POSTing one body to any path, so that bench/serve can
 * load /invocations and /v2/models/NAME/infer as bench-serve loads
 * /v1/predict.
 *
 *   mr_loadtool PORT PATH BODY_FILE QPS DURATION_S CONNECTIONS
 *       QPS 0: closed loop. Prints one JSON object: achieved_qps, sent, ok,
 *       non_2xx, errors, p50_ms, p90_ms, p99_ms, max_ms.
 */
#include "millrace/serve.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: mr_loadtool PORT PATH BODY_FILE QPS DURATION_S CONNECTIONS\n");
        return 2;
    }
    mr_error err;
    mr_error_init(&err);
    char *body = NULL;
    size_t len = 0;
    if (mr_fs_read_file(argv[3], (size_t)1 << 20, &body, &len, &err) != MR_OK) {
        mr_log_error(&err);
        return 1;
    }
    mr_loadgen_opts o;
    mr_loadgen_opts_init(&o);
    o.port = (int)strtol(argv[1], NULL, 10);
    o.path = argv[2];
    o.body = body;
    o.qps = strtod(argv[4], NULL);
    o.duration_s = strtod(argv[5], NULL);
    o.connections = (int)strtol(argv[6], NULL, 10);
    signal(SIGPIPE, SIG_IGN);
    mr_loadgen_result r;
    int rc = 0;
    if (mr_loadgen_run(&o, &r, &err) != MR_OK) {
        mr_log_error(&err);
        rc = 1;
    } else {
        printf("{\"achieved_qps\": %.1f, \"sent\": %llu, \"ok\": %llu, \"non_2xx\": %llu, \"errors\": %llu, "
               "\"p50_ms\": %.4f, \"p90_ms\": %.4f, \"p99_ms\": %.4f, \"max_ms\": %.4f}\n",
               r.achieved_qps, (unsigned long long)r.sent, (unsigned long long)r.ok, (unsigned long long)r.non_2xx,
               (unsigned long long)r.errors, r.p50_ms, r.p90_ms, r.p99_ms, r.max_ms);
    }
    mr_free(body);
    return rc;
}
