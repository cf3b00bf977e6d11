/* Writing a table as CSV (RFC 4180): header line, fields quoted only when
 * they hold the delimiter, a quote, CR or LF; nulls as empty fields. Values
 * are formatted by mr_column_format (shortest round-trip floats, ISO dates
 * and timestamps). The file is written to a temporary name and renamed. */
#include "millrace/csv.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static mr_status put_field(mr_buf *b, const char *s, size_t len, char delim)
{
    int quote = 0;
    for (size_t i = 0; i < len && !quote; i++) quote = s[i] == delim || s[i] == '"' || s[i] == '\n' || s[i] == '\r';
    if (!quote) return mr_buf_append(b, s, len);
    mr_status rc = mr_buf_append(b, "\"", 1);
    for (size_t i = 0; rc == MR_OK && i < len; i++) rc = s[i] == '"' ? mr_buf_append(b, "\"\"", 2) : mr_buf_append(b, s + i, 1);
    return rc == MR_OK ? mr_buf_append(b, "\"", 1) : rc;
}

mr_status mr_csv_write_table(const char *path, const mr_table *t, char delim, mr_error *err)
{
    char *tmp = mr_asprintf("%s.tmp.%ld", path, (long)getpid());
    if (!tmp) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    FILE *f = fopen(tmp, "w");
    mr_status rc = MR_OK;
    mr_buf line, val;
    mr_buf_init(&line);
    mr_buf_init(&val);
    if (!f) {
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", tmp);
        goto done;
    }
    for (size_t j = 0; rc == MR_OK && j < t->n_cols; j++) {
        if (j) rc = mr_buf_append(&line, &delim, 1);
        if (rc == MR_OK) rc = put_field(&line, t->cols[j]->name, strlen(t->cols[j]->name), delim);
    }
    if (rc == MR_OK) rc = mr_buf_append(&line, "\n", 1);
    for (size_t i = 0; rc == MR_OK && i < t->n_rows; i++) {
        for (size_t j = 0; rc == MR_OK && j < t->n_cols; j++) {
            const mr_column *c = t->cols[j];
            if (j) rc = mr_buf_append(&line, &delim, 1);
            if (rc != MR_OK || mr_column_is_null(c, i)) continue;
            val.len = 0;
            rc = mr_column_format(c, i, &val);
            if (rc == MR_OK) rc = put_field(&line, val.data ? val.data : "", val.len, delim);
        }
        if (rc == MR_OK) rc = mr_buf_append(&line, "\n", 1);
        if (rc == MR_OK && line.len >= ((size_t)1 << 20)) { /* flush every MiB */
            if (fwrite(line.data, 1, line.len, f) != line.len) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", tmp);
            line.len = 0;
        }
    }
    if (rc == MR_OK && line.len && fwrite(line.data, 1, line.len, f) != line.len)
        rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", tmp);
    if (rc != MR_OK && !mr_error_is_set(err)) MR_ERR(err, rc, "%s: out of memory", path);
    if (fflush(f) != 0 && rc == MR_OK) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: write failed", tmp);
    if (rc == MR_OK && fsync(fileno(f)) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: fsync failed", tmp);
    fclose(f);
    if (rc == MR_OK && rename(tmp, path) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rename into place", path);
    if (rc != MR_OK) unlink(tmp);
done:
    mr_buf_free(&line);
    mr_buf_free(&val);
    mr_free(tmp);
    return rc;
}
