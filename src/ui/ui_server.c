/* The run browser's HTTP server (include/millrace/ui.h): libmicrohttpd with
 * a thread per connection in front of the app (ui_app.c), which answers one
 * request at a time (it holds one SQLite connection and the runs
 * snapshot). GET and HEAD only; every response carries a strict content
 * security policy (the page loads nothing from elsewhere) and no-store,
 * so a page is never stale after a run. */
#define _GNU_SOURCE
#include "ui_int.h"

#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_CONNECTIONS 64
#define IDLE_TIMEOUT_S 60

struct mr_ui {
    struct MHD_Daemon *d;
    mr_ui_app *app;
    pthread_mutex_t mu;
    int port;
};

void mr_ui_opts_init(mr_ui_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->dir = ".";
    o->host = "127.0.0.1";
    o->port = 8090;
}

static const char *arg_of(void *ctx, const char *key)
{
    return MHD_lookup_connection_value((struct MHD_Connection *)ctx, MHD_GET_ARGUMENT_KIND, key);
}

static const char *no_args(void *ctx, const char *key)
{
    (void)ctx;
    (void)key;
    return NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    (void)upload;
    mr_ui *u = cls;
    if (!*con_cls) { /* headers only: wait for the (empty) body */
        *con_cls = u;
        return MHD_YES;
    }
    if (*upload_size) { /* a body is not read: the app answers 405 for every method that has one */
        *upload_size = 0;
        return MHD_YES;
    }
    mr_ui_response r;
    pthread_mutex_lock(&u->mu);
    mr_ui_app_handle(u->app, method, url, arg_of, c, &r);
    pthread_mutex_unlock(&u->mu);
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(r.body.len, r.body.data ? r.body.data : (void *)"", MHD_RESPMEM_MUST_COPY);
    mr_buf_free(&r.body);
    if (!resp) return MHD_NO;
    MHD_add_response_header(resp, "Content-Type", r.content_type);
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(resp, "Content-Security-Policy",
                            "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                            "img-src 'self' data:; frame-src 'self'; connect-src 'self'");
    if (r.attachment[0]) {
        char disp[320];
        snprintf(disp, sizeof(disp), "attachment; filename=\"%s\"", r.attachment);
        MHD_add_response_header(resp, "Content-Disposition", disp);
    }
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r.status, resp);
    MHD_destroy_response(resp);
    return ret;
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\r\n")] = '\0';
    mr_log(MR_LOG_WARN, "http: %s", buf);
}

mr_status mr_ui_start(const mr_ui_opts *o, mr_ui **out, mr_error *err)
{
    *out = NULL;
    mr_ui *u = mr_calloc(1, sizeof(*u));
    if (!u) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    pthread_mutex_init(&u->mu, NULL);
    int fd = -1, v6 = 0;
    mr_status st = mr_ui_app_open(o->dir, &u->app, err);
    if (st == MR_OK) { /* the runs snapshot is built now, not for the first visitor (0.7 s at 10,000 runs) */
        mr_ui_response warm;
        mr_ui_app_handle(u->app, "GET", "/api/columns", no_args, NULL, &warm);
        mr_buf_free(&warm.body);
    }
    if (st == MR_OK) st = mr_net_listen(o->host, o->port, &fd, &v6, NULL, 0, err);
    if (st == MR_OK) {
        unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_ERROR_LOG;
        if (v6) flags |= MHD_USE_IPv6;
        u->d = MHD_start_daemon(flags, 0, NULL, NULL, on_request, u, MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL,
                                MHD_OPTION_LISTEN_SOCKET, fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
                                MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)IDLE_TIMEOUT_S, MHD_OPTION_END);
        if (!u->d) {
            close(fd);
            st = MR_ERR(err, MR_E_INTERNAL, "the HTTP daemon did not start");
        }
    }
    if (st != MR_OK) {
        mr_ui_app_close(u->app);
        pthread_mutex_destroy(&u->mu);
        mr_free(u);
        return st;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(u->d, MHD_DAEMON_INFO_BIND_PORT);
    u->port = info ? (int)info->port : o->port;
    *out = u;
    return MR_OK;
}

int mr_ui_port(const mr_ui *u) { return u->port; }

void mr_ui_stop(mr_ui *u)
{
    if (!u) return;
    MHD_stop_daemon(u->d);
    mr_ui_app_close(u->app);
    pthread_mutex_destroy(&u->mu);
    mr_free(u);
}
