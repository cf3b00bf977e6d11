/* Log sink: level filter, colour on/off, and the one place that formats
 * errors for people. The CLI configures it; the library only calls it.
 * Messages quote data, so they are printed through mr_term_escape. */
#include "millrace/core.h"

#include <string.h>
#include <time.h>

static mr_log_level log_level = MR_LOG_INFO;
static int log_colour;
static mr_log_sink_fn sink_fn;
static void *sink_ctx;
static mr_log_level sink_level = MR_LOG_WARN;

void mr_log_set_sink(mr_log_level min_level, mr_log_sink_fn fn, void *ctx)
{
    sink_level = min_level;
    sink_fn = fn;
    sink_ctx = ctx;
}

void mr_log_set_level(mr_log_level lvl) { log_level = lvl; }
mr_log_level mr_log_get_level(void) { return log_level; }
void mr_log_set_color(int on) { log_colour = on; }
int mr_log_color(void) { return log_colour; }

const char *mr_c_bold(void) { return log_colour ? "\033[1m" : ""; }
const char *mr_c_red(void) { return log_colour ? "\033[31m" : ""; }
const char *mr_c_green(void) { return log_colour ? "\033[32m" : ""; }
const char *mr_c_yellow(void) { return log_colour ? "\033[33m" : ""; }
const char *mr_c_dim(void) { return log_colour ? "\033[2m" : ""; }
const char *mr_c_reset(void) { return log_colour ? "\033[0m" : ""; }

void mr_log(mr_log_level lvl, const char *fmt, ...)
{
    int to_sink = sink_fn && lvl >= sink_level;
    if (lvl < log_level && !to_sink) return;
    char raw[2048], safe[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(raw, sizeof(raw), fmt, ap);
    va_end(ap);
    /* messages quote data (names, values): nothing in them may drive the terminal */
    const char *msg = raw;
    if (!mr_term_safe(raw, strlen(raw))) {
        mr_term_escape(raw, safe, sizeof(safe));
        msg = safe;
    }
    if (lvl >= log_level) {
        mr_progress_clear();
        const char *prefix = "";
        if (lvl == MR_LOG_WARN) prefix = "millrace: warning: ";
        if (lvl == MR_LOG_ERROR) prefix = "millrace: error: ";
        if (lvl == MR_LOG_DEBUG) prefix = "millrace: debug: ";
        fprintf(stderr, "%s%s\n", prefix, msg);
    }
    if (to_sink) sink_fn(sink_ctx, lvl, msg);
}

void mr_log_error(const mr_error *err)
{
    char buf[2048], safe[4096];
    mr_error_format(err, buf, sizeof(buf));
    mr_term_escape(buf, safe, sizeof(safe)); /* a message quotes input: escape what a terminal would act on */
    mr_progress_clear();
    fprintf(stderr, "%smillrace: error:%s %s\n", mr_c_red(), mr_c_reset(), safe);
    if (err && err->hint[0]) {
        mr_term_escape(err->hint, safe, sizeof(safe));
        fprintf(stderr, "hint: %s\n", safe);
    }
}

double mr_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double mr_wall_time(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void mr_iso_time(double epoch_s, char *buf, size_t buf_len)
{
    time_t t = (time_t)epoch_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, buf_len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}
