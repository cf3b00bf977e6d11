/* The one CSV writer (RFC 4180): a header line, then one record per row. A
 * null is an empty unquoted field (in a one-column table, where an empty
 * record would be a blank line, "" or for strings NA); a value is quoted when
 * it is empty, holds the delimiter, a quote, CR or LF, begins with a UTF-8
 * BOM, or equals a default null token (so the string "NA" and the float NaN,
 * printed "nan", read back as what they were).
 * Values are formatted by mr_column_format (shortest round-trip floats, ISO
 * dates and timestamps). Files are written under a temporary name, fsynced
 * and renamed into place; nothing half-written is ever at the path. */
#include "millrace/csv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define FLUSH_BYTES ((size_t)1 << 20) /* write out the line buffer every MiB */

struct mr_csv_writer {
    char *path, *tmp;
    FILE *f;
    char delim;
    size_t n_cols;   /* fixed by the first table */
    int started;     /* header written */
    mr_status sticky;
    mr_buf line, val;
};

/* 1 when s equals a default null token (all are 1..8 bytes). */
static int is_null_token(const char *s, size_t len)
{
    if (len == 0 || len > 8) return 0;
    size_t n;
    const char *const *t = mr_csv_default_null_tokens(&n);
    for (size_t i = 0; i < n; i++)
        if (t[i][0] == s[0] && strlen(t[i]) == len && !memcmp(t[i], s, len)) return 1;
    return 0;
}

mr_status mr_csv_append_field(mr_buf *out, const char *s, size_t len, char delim)
{
    /* a leading BOM would be taken for the file's own at its start */
    int quote = len == 0 || is_null_token(s, len) || (len >= 3 && !memcmp(s, "\xEF\xBB\xBF", 3));
    for (size_t i = 0; i < len && !quote; i++) quote = s[i] == delim || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
    if (!quote) return mr_buf_append(out, s, len);
    mr_status rc = mr_buf_append(out, "\"", 1);
    while (rc == MR_OK && len) {
        const char *q = memchr(s, '"', len);
        size_t k = q ? (size_t)(q - s) + 1 : len; /* up to and including the quote */
        rc = mr_buf_append(out, s, k);
        if (rc == MR_OK && q) rc = mr_buf_append(out, "\"", 1); /* ... which is doubled */
        s += k;
        len -= k;
    }
    return rc == MR_OK ? mr_buf_append(out, "\"", 1) : rc;
}

mr_status mr_csv_writer_open(const char *path, char delim, mr_csv_writer **out, mr_error *err)
{
    *out = NULL;
    if (delim == '"' || delim == '\n' || delim == '\r' || delim == '\0')
        return MR_ERR(err, MR_E_INVALID_ARG, "%s: the CSV delimiter must not be NUL, a quote, CR or LF", path);
    mr_csv_writer *w = mr_calloc(1, sizeof(*w));
    if (!w) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    w->delim = delim;
    mr_buf_init(&w->line);
    mr_buf_init(&w->val);
    w->path = mr_strdup(path);
    w->tmp = mr_asprintf("%s.tmp.%ld", path, (long)getpid());
    if (!w->path || !w->tmp) {
        mr_csv_writer_free(w);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    w->f = fopen(w->tmp, "w");
    if (!w->f) {
        mr_status rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", w->tmp);
        mr_csv_writer_free(w);
        return rc;
    }
    *out = w;
    return MR_OK;
}

static mr_status flush_line(mr_csv_writer *w, mr_error *err)
{
    if (w->line.len && fwrite(w->line.data, 1, w->line.len, w->f) != w->line.len)
        return MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", w->tmp);
    w->line.len = 0;
    return MR_OK;
}

/* Appends row i of t to w->line. */
static mr_status put_row(mr_csv_writer *w, const mr_table *t, size_t i)
{
    mr_status rc = MR_OK;
    for (size_t j = 0; rc == MR_OK && j < t->n_cols; j++) {
        const mr_column *c = t->cols[j];
        if (j) rc = mr_buf_append(&w->line, &w->delim, 1);
        if (rc != MR_OK) continue;
        if (mr_column_is_null(c, i)) {
            /* an empty record would be skipped as a blank line: in a table
             * of one column a null is "" (null in any non-string column) or,
             * for strings, the null token NA */
            if (t->n_cols == 1) rc = mr_buf_puts(&w->line, c->type == MR_T_STRING ? "NA" : "\"\"");
            continue;
        }
        if (c->type == MR_T_STRING) {
            size_t len;
            const char *p = mr_column_str(c, i, &len);
            rc = mr_csv_append_field(&w->line, p, len, w->delim);
            continue;
        }
        w->val.len = 0;
        rc = mr_column_format(c, i, &w->val);
        if (rc == MR_OK) rc = mr_csv_append_field(&w->line, w->val.data ? w->val.data : "", w->val.len, w->delim);
    }
    return rc == MR_OK ? mr_buf_append(&w->line, "\n", 1) : rc;
}

mr_status mr_csv_writer_write(mr_csv_writer *w, const mr_table *t, mr_error *err)
{
    if (w->sticky != MR_OK) return MR_ERR(err, MR_E_STATE, "%s: the CSV writer failed before", w->path);
    mr_status rc = MR_OK;
    if (!w->started) {
        w->n_cols = t->n_cols;
        for (size_t j = 0; rc == MR_OK && j < t->n_cols; j++) {
            if (j) rc = mr_buf_append(&w->line, &w->delim, 1);
            if (rc == MR_OK) rc = mr_csv_append_field(&w->line, t->cols[j]->name, strlen(t->cols[j]->name), w->delim);
        }
        if (rc == MR_OK) rc = mr_buf_append(&w->line, "\n", 1);
        w->started = 1;
    } else if (t->n_cols != w->n_cols) {
        rc = MR_ERR(err, MR_E_SCHEMA, "%s: a batch of %zu columns after a header of %zu", w->path, t->n_cols,
                    w->n_cols);
        goto done;
    }
    for (size_t i = 0; rc == MR_OK && i < t->n_rows; i++) {
        rc = put_row(w, t, i);
        if (rc == MR_OK && w->line.len >= FLUSH_BYTES) rc = flush_line(w, err);
    }
    if (rc == MR_OK) rc = flush_line(w, err);
    if (rc != MR_OK && !mr_error_is_set(err)) MR_ERR(err, rc, "%s: out of memory", w->path);
done:
    w->sticky = rc;
    return rc;
}

mr_status mr_csv_writer_close(mr_csv_writer *w, mr_error *err)
{
    if (!w) return MR_OK;
    mr_status rc = w->sticky != MR_OK ? MR_ERR(err, MR_E_STATE, "%s: the CSV writer failed before", w->path) : MR_OK;
    if (rc == MR_OK && fflush(w->f) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", w->tmp);
    if (rc == MR_OK && fsync(fileno(w->f)) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: fsync failed", w->tmp);
    if (fclose(w->f) != 0 && rc == MR_OK) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", w->tmp);
    w->f = NULL;
    if (rc == MR_OK && rename(w->tmp, w->path) != 0)
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rename into place", w->path);
    if (rc == MR_OK) { /* published: nothing left to remove */
        mr_free(w->tmp);
        w->tmp = NULL;
    }
    mr_csv_writer_free(w);
    return rc;
}

void mr_csv_writer_free(mr_csv_writer *w)
{
    if (!w) return;
    if (w->f) fclose(w->f);
    if (w->tmp) unlink(w->tmp);
    mr_buf_free(&w->line);
    mr_buf_free(&w->val);
    mr_free(w->tmp);
    mr_free(w->path);
    mr_free(w);
}

mr_status mr_csv_write_table(const char *path, const mr_table *t, char delim, mr_error *err)
{
    mr_csv_writer *w = NULL;
    mr_status rc = mr_csv_writer_open(path, delim, &w, err);
    if (rc == MR_OK) rc = mr_csv_writer_write(w, t, err);
    if (rc == MR_OK) return mr_csv_writer_close(w, err);
    mr_csv_writer_free(w);
    return rc;
}
