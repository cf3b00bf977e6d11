/* Status names and the mr_error object: first error wins, context is added
 * by callers without overwriting what the callee said. */
#include "millrace/core.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

const char *mr_status_name(mr_status s)
{
    switch (s) {
#define MR__NAME(name, val, str) \
    case MR_##name:              \
        return #name;
        MR_STATUS_MAP(MR__NAME)
#undef MR__NAME
    }
    return "UNKNOWN";
}

const char *mr_status_str(mr_status s)
{
    switch (s) {
#define MR__STR(name, val, str) \
    case MR_##name:             \
        return str;
        MR_STATUS_MAP(MR__STR)
#undef MR__STR
    }
    return "unknown status";
}

void mr_error_init(mr_error *err)
{
    if (err) memset(err, 0, sizeof(*err));
}

void mr_error_clear(mr_error *err) { mr_error_init(err); }

int mr_error_is_set(const mr_error *err) { return err && err->code != MR_OK; }

void mr__alloc_note_nomem_error(void); /* alloc.c: the torture's evidence */

static void set_vmsg(mr_error *err, const char *fmt, va_list ap)
{
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    size_t n = strlen(err->msg);
    while (n > 0 && err->msg[n - 1] == '\n') err->msg[--n] = '\0';
}

mr_status mr__error_set(mr_error *err, const char *src_file, int src_line, mr_status code,
                        const char *fmt, ...)
{
    if (code == MR_E_NOMEM) mr__alloc_note_nomem_error();
    if (!err || err->code != MR_OK) return code;
    err->code = code;
    err->src_file = src_file;
    err->src_line = src_line;
    va_list ap;
    va_start(ap, fmt);
    set_vmsg(err, fmt, ap);
    va_end(ap);
    return code;
}

mr_status mr_error_vset_file(mr_error *err, mr_status code, const char *file, const char *fmt, va_list ap)
{
    if (code == MR_E_NOMEM) mr__alloc_note_nomem_error();
    if (!err) return code;
    if (err->code == MR_OK) {
        err->code = code;
        set_vmsg(err, fmt, ap);
    }
    if (file) mr_error_at(err, file, 0, 0);
    return code;
}

mr_status mr_error_set_at(mr_error *err, const char *file, long line, long col, mr_status code, const char *fmt, ...)
{
    if (code == MR_E_NOMEM) mr__alloc_note_nomem_error();
    if (!err) return code;
    if (err->code == MR_OK) {
        err->code = code;
        va_list ap;
        va_start(ap, fmt);
        set_vmsg(err, fmt, ap);
        va_end(ap);
    }
    mr_error_at(err, file, line, col);
    return code;
}

mr_status mr__error_sys(mr_error *err, const char *src_file, int src_line, mr_status code,
                        int errnum, const char *fmt, ...)
{
    if (code == MR_E_NOMEM) mr__alloc_note_nomem_error();
    if (!err || err->code != MR_OK) return code;
    err->code = code;
    err->sys_errno = errnum;
    err->src_file = src_file;
    err->src_line = src_line;
    va_list ap;
    va_start(ap, fmt);
    set_vmsg(err, fmt, ap);
    va_end(ap);
    size_t n = strlen(err->msg);
    if (errnum && n < sizeof(err->msg) - 3)
        snprintf(err->msg + n, sizeof(err->msg) - n, ": %s", strerror(errnum));
    return code;
}

void mr_error_at(mr_error *err, const char *file, long line, long col)
{
    if (!err) return;
    if (file && !err->file[0]) snprintf(err->file, sizeof(err->file), "%s", file);
    if (line && !err->line) {
        err->line = line;
        if (!err->col) err->col = col;
    }
}

void mr_error_key(mr_error *err, const char *key)
{
    if (err && key && !err->key[0]) snprintf(err->key, sizeof(err->key), "%s", key);
}

void mr_error_stage(mr_error *err, const char *stage)
{
    if (err && stage && !err->stage[0]) snprintf(err->stage, sizeof(err->stage), "%s", stage);
}

void mr_error_hint(mr_error *err, const char *fmt, ...)
{
    if (!err || err->hint[0]) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->hint, sizeof(err->hint), fmt, ap);
    va_end(ap);
}

void mr_error_format(const mr_error *err, char *buf, size_t buf_len)
{
    if (!buf_len) return;
    buf[0] = '\0';
    if (!err) return;
    size_t off = 0;
#define APPEND(...)                                                              \
    do {                                                                         \
        if (off < buf_len) {                                                     \
            int k_ = snprintf(buf + off, buf_len - off, __VA_ARGS__);            \
            if (k_ > 0) off += (size_t)k_;                                       \
        }                                                                        \
    } while (0)
    /* An error names a path once: a message that already starts with its
     * file ("x.csv: cannot open") is not prefixed with it again. */
    size_t flen = strlen(err->file);
    int named = flen && !err->line && !err->row && !strncmp(err->msg, err->file, flen) && err->msg[flen] == ':';
    if (err->file[0] && !named) {
        APPEND("%s", err->file);
        if (err->line) {
            APPEND(":%ld", err->line);
            if (err->col) APPEND(":%ld", err->col);
        } else if (err->row) {
            APPEND(": row %ld", err->row);
        }
        APPEND(": ");
    }
    if (err->stage[0]) APPEND("stage '%s': ", err->stage);
    APPEND("%s", err->msg[0] ? err->msg : mr_status_str(err->code));
#undef APPEND
}

_Noreturn void mr__assert_fail(const char *expr, const char *file, int line)
{
    fprintf(stderr, "millrace: internal error: assertion failed: %s (%s:%d)\n", expr, file, line);
    abort();
}
