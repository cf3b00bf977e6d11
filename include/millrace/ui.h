/* The run browser (`millrace ui`, docs/ui.md): a read-only local web app
 * over a workspace's run store and artifact store. One page (HTML, CSS and
 * JavaScript shipped in the binary, nothing loaded from elsewhere) and a
 * JSON API it calls: the runs table (params and metrics as columns, sort,
 * filter expressions, paging), metric curves downsampled on the server to
 * the chart's width, N-run comparisons, one run's stages, logs, artifacts,
 * lineage and report.
 *
 * The app (mr_ui_app) answers requests without sockets, which is what the
 * unit tests drive; the server (mr_ui) puts it behind libmicrohttpd.
 *
 * Example:
 *
 *   mr_ui_opts o;
 *   mr_ui_opts_init(&o);
 *   o.dir = ".";          // the workspace (searched upwards)
 *   o.port = 0;           // any free port
 *   mr_ui *u = NULL;
 *   if (mr_ui_start(&o, &u, &err) != MR_OK) {
 *       mr_log_error(&err);   // "cannot listen on 127.0.0.1:8090: port 8090 is already in use"
 *       return;
 *   }
 *   printf("http://127.0.0.1:%d/\n", mr_ui_port(u));
 *   // ... until told to stop ...
 *   mr_ui_stop(u);
 *
 * Ownership: a server or app is the caller's until its stop/close. A
 * response's body is the caller's (mr_buf_free).
 * Status codes: MR_E_NOT_FOUND (no workspace), MR_E_INVALID_ARG (a bad
 * host or port), MR_E_IO (cannot bind: the message names host and port),
 * the run store's errors, MR_E_NOMEM.
 * Thread safety: start/stop from one thread; the server answers on its own
 * threads, one request at a time per app (a mutex). */
#ifndef MILLRACE_UI_H
#define MILLRACE_UI_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_ui_app mr_ui_app;

/* Opens the workspace at or above dir for reading. */
mr_status mr_ui_app_open(const char *dir, mr_ui_app **out, mr_error *err);
void mr_ui_app_close(mr_ui_app *a); /* NULL is a no-op */

typedef struct mr_ui_response {
    int status;               /* HTTP status */
    const char *content_type; /* static */
    char attachment[256];     /* non-empty: download under this file name */
    mr_buf body;
} mr_ui_response;
/* A request's query arguments: the value of key, or NULL when absent. */
typedef const char *(*mr_ui_arg_fn)(void *ctx, const char *key);
/* Answers one request (method, path without the query) into out (its body
 * initialised here). Never fails: errors are 4xx/5xx responses with a JSON
 * body {"error": message}. */
void mr_ui_app_handle(mr_ui_app *a, const char *method, const char *path, mr_ui_arg_fn arg, void *arg_ctx,
                      mr_ui_response *out);

typedef struct mr_ui_opts {
    const char *dir;  /* workspace directory (searched upwards); default "." */
    const char *host; /* IPv4 or IPv6 literal or "localhost"; default "127.0.0.1" */
    int port;         /* default 8090; 0 = any free port */
} mr_ui_opts;
void mr_ui_opts_init(mr_ui_opts *o);

typedef struct mr_ui mr_ui;
mr_status mr_ui_start(const mr_ui_opts *o, mr_ui **out, mr_error *err);
int mr_ui_port(const mr_ui *u);
void mr_ui_stop(mr_ui *u); /* closes connections and frees u; NULL is a no-op */

#ifdef __cplusplus
}
#endif
#endif
