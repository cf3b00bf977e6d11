/* Test helper (not installed): inspects, dumps and generates Parquet files
 * through the public API, for the DuckDB round-trip script and for humans.
 *
 *   mr_pqtool info FILE              schema, row groups, stats
 *   mr_pqtool dump FILE              CSV of every value (NULL for nulls)
 *   mr_pqtool gen OUT.parquet N CODEC [ROWS_PER_GROUP]
 *                                    writes a deterministic N-row table of
 *                                    every type, and its CSV on stdout
 * CSV: RFC 4180 quoting, values as mr_column_format prints them. */
#include "millrace/parquet.h"

#include <stdlib.h>
#include <string.h>

static void put_csv(mr_buf *b)
{
    int q = 0;
    for (size_t i = 0; i < b->len; i++)
        if (b->data[i] == ',' || b->data[i] == '"' || b->data[i] == '\n' || b->data[i] == '\r') q = 1;
    if (!q) {
        fwrite(b->data, 1, b->len, stdout);
        return;
    }
    putchar('"');
    for (size_t i = 0; i < b->len; i++) {
        if (b->data[i] == '"') putchar('"');
        putchar(b->data[i]);
    }
    putchar('"');
}

static int dump_table(const mr_table *t, int header)
{
    mr_buf b;
    mr_buf_init(&b);
    if (header) {
        for (size_t j = 0; j < t->n_cols; j++) {
            b.len = 0;
            mr_buf_puts(&b, t->cols[j]->name);
            if (j) putchar(',');
            put_csv(&b);
        }
        putchar('\n');
    }
    for (size_t i = 0; i < t->n_rows; i++) {
        for (size_t j = 0; j < t->n_cols; j++) {
            b.len = 0;
            if (mr_column_format(t->cols[j], i, &b) != MR_OK) {
                mr_buf_free(&b);
                return 1;
            }
            if (j) putchar(',');
            put_csv(&b);
        }
        putchar('\n');
    }
    mr_buf_free(&b);
    return 0;
}

static int cmd_info(const char *path, mr_error *err)
{
    mr_parquet_file *f;
    if (mr_parquet_open(path, &f, err) != MR_OK) return 1;
    printf("rows %lld, row groups %zu, created_by \"%s\"\n", (long long)mr_parquet_num_rows(f),
           mr_parquet_num_row_groups(f), mr_parquet_created_by(f));
    for (size_t i = 0; i < mr_parquet_num_columns(f); i++) {
        const mr_parquet_column_info *c = mr_parquet_column(f, i);
        printf("column %zu '%s': %s%s%s rep=%d -> %s\n", i, c->name, mr_parquet_type_name(c->physical),
               c->logical[0] ? "/" : "", c->logical, c->repetition, mr_dtype_name(c->dtype));
    }
    for (size_t g = 0; g < mr_parquet_num_row_groups(f); g++) {
        printf("row group %zu: %lld rows, %lld bytes\n", g, (long long)mr_parquet_row_group_rows(f, g),
               (long long)mr_parquet_row_group_bytes(f, g));
        for (size_t i = 0; i < mr_parquet_num_columns(f); i++) {
            mr_parquet_stats s;
            mr_parquet_codec codec = MR_PQ_UNCOMPRESSED;
            mr_parquet_chunk_codec(f, g, i, &codec);
            if (mr_parquet_column_stats(f, g, i, &s, err) != MR_OK) continue;
            printf("  %s [%s]: nulls=%lld", mr_parquet_column(f, i)->name, mr_parquet_codec_name(codec),
                   s.has_null_count ? (long long)s.null_count : -1LL);
            if (s.has_min_max) {
                if (s.kind == MR_PQ_STAT_INT) printf(" min=%lld max=%lld", (long long)s.min_i, (long long)s.max_i);
                else if (s.kind == MR_PQ_STAT_DOUBLE) printf(" min=%.17g max=%.17g", s.min_d, s.max_d);
                else printf(" min=\"%.*s\" max=\"%.*s\"", (int)s.min_len, s.min_s, (int)s.max_len, s.max_s);
            }
            printf("\n");
        }
    }
    for (size_t i = 0; i < mr_parquet_num_kv(f); i++) {
        const char *v;
        const char *k = mr_parquet_kv(f, i, &v);
        printf("kv %s = %s\n", k, v ? v : "(null)");
    }
    mr_parquet_close(f);
    return 0;
}

static int cmd_dump(const char *path, mr_error *err)
{
    mr_parquet_file *f;
    if (mr_parquet_open(path, &f, err) != MR_OK) return 1;
    int rc = 0;
    for (size_t g = 0; g < mr_parquet_num_row_groups(f) && !rc; g++) {
        mr_table *t;
        if (mr_parquet_read_row_group(f, g, NULL, 0, &t, err) != MR_OK) {
            rc = 1;
            break;
        }
        rc = dump_table(t, g == 0);
        mr_table_free(t);
    }
    mr_parquet_close(f);
    return rc;
}

/* Deterministic table: id, b, i, f64, f32, s (plain, unique-ish), cat
 * (dictionary), d (date), ts (timestamp); every 7th row has nulls. */
static mr_status gen_table(size_t n, mr_table **out, mr_error *err)
{
    mr_table *t = NULL;
    mr_column *c[9] = {0};
    mr_status rc = mr_table_new(&t, err);
    const char *names[] = {"id", "b", "i", "f64", "f32", "s", "cat", "d", "ts"};
    mr_dtype types[] = {MR_T_INT64, MR_T_BOOL, MR_T_INT64, MR_T_FLOAT64, MR_T_FLOAT32, MR_T_STRING, MR_T_STRING, MR_T_DATE, MR_T_TIMESTAMP};
    for (int k = 0; k < 9 && rc == MR_OK; k++) {
        if (k == 6) {
            mr_column *d = NULL;
            rc = mr_column_new("dict", MR_T_STRING, 4, &d, err);
            const char *cats[] = {"red", "green", "blue, \"navy\"", ""};
            for (int j = 0; j < 4 && rc == MR_OK; j++) rc = mr_column_append_str(d, cats[j], strlen(cats[j]));
            if (rc == MR_OK) rc = mr_column_new_dict(names[k], d, n, &c[k], err);
        } else {
            rc = mr_column_new(names[k], types[k], n, &c[k], err);
        }
    }
    uint64_t x = 88172645463325252ULL;
    for (size_t i = 0; i < n && rc == MR_OK; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int null = i % 7 == 3;
        rc = mr_column_append_int64(c[0], (int64_t)i);
        if (rc == MR_OK) rc = null ? mr_column_append_null(c[1]) : mr_column_append_bool(c[1], (x >> 3) & 1);
        if (rc == MR_OK) rc = null ? mr_column_append_null(c[2]) : mr_column_append_int64(c[2], (int64_t)(x % 2000001) - 1000000);
        if (rc == MR_OK) rc = null ? mr_column_append_null(c[3]) : mr_column_append_float64(c[3], (double)(int64_t)(x % 100000) / 64.0 - 700.25);
        if (rc == MR_OK) rc = null ? mr_column_append_null(c[4]) : mr_column_append_float32(c[4], (float)(x % 1000) / 8.0f);
        char s[32];
        int sl = snprintf(s, sizeof s, "s%llu", (unsigned long long)(x % 100000));
        if (rc == MR_OK) rc = null ? mr_column_append_null(c[5]) : mr_column_append_str(c[5], i % 11 == 5 ? "" : s, i % 11 == 5 ? 0 : (size_t)sl);
        if (rc == MR_OK) rc = i % 5 == 1 ? mr_column_append_null(c[6]) : mr_column_append_code(c[6], (int32_t)(x % 4));
        if (rc == MR_OK) rc = null ? mr_column_append_null(c[7]) : mr_column_append_int32(c[7], (int32_t)(x % 40000) - 10000);
        if (rc == MR_OK) rc = null ? mr_column_append_null(c[8]) : mr_column_append_int64(c[8], (int64_t)(x % 4000000000000000ULL) - 1000000000000000LL);
    }
    if (rc != MR_OK) MR_ERR(err, rc, "cannot build the table");
    for (int k = 0; k < 9; k++) {
        if (rc == MR_OK) rc = mr_table_add_column(t, c[k], err);
        else mr_column_free(c[k]);
    }
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

int main(int argc, char **argv)
{
    mr_error err;
    mr_error_init(&err);
    int rc = 2;
    if (argc == 3 && !strcmp(argv[1], "info")) {
        rc = cmd_info(argv[2], &err);
    } else if (argc == 3 && !strcmp(argv[1], "dump")) {
        rc = cmd_dump(argv[2], &err);
    } else if ((argc == 5 || argc == 6) && !strcmp(argv[1], "gen")) {
        mr_parquet_write_opts o;
        mr_parquet_write_opts_init(&o);
        if (mr_parquet_codec_parse(argv[4], &o.codec) != MR_OK) {
            fprintf(stderr, "mr_pqtool: unknown codec %s\n", argv[4]);
            return 2;
        }
        if (argc == 6) o.row_group_rows = (size_t)strtoull(argv[5], NULL, 10);
        const char *keys[] = {"origin"}, *vals[] = {"mr_pqtool"};
        o.kv_keys = keys;
        o.kv_values = vals;
        o.n_kv = 1;
        mr_table *t = NULL;
        rc = gen_table((size_t)strtoull(argv[3], NULL, 10), &t, &err) != MR_OK;
        if (!rc) rc = mr_parquet_write_table(argv[2], t, &o, &err) != MR_OK;
        if (!rc) rc = dump_table(t, 1);
        mr_table_free(t);
    } else {
        fprintf(stderr, "usage: mr_pqtool info FILE | dump FILE | gen OUT N CODEC [ROWS_PER_GROUP]\n");
        return 2;
    }
    if (rc == 1) {
        char buf[1024];
        mr_error_format(&err, buf, sizeof buf);
        fprintf(stderr, "mr_pqtool: error: %s\n", buf);
    }
    return rc;
}
