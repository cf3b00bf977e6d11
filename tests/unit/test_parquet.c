/* Unit tests for the Parquet reader/writer (src/data/parquet_*.c) and the
 * thrift compact codec (src/data/thrift.c): codec round trips, RLE hybrid,
 * write/read round trips over every type and codec, statistics, errors,
 * truncated/corrupted files, the apache parquet-testing files (when
 * MILLRACE_PARQUET_TESTING points at them) and DuckDB-written fixtures
 * compared cell for cell with DuckDB's own reading (tests/fixtures/parquet). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include "data/parquet_int.h"

#include <lz4.h>
#include <lz4frame.h>

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "data/parquet_int.h"
#include "data/thrift.h"
#include "millrace/dataset.h"
#include "millrace/parquet.h"

static char tmpdir[256];

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/mr-pq-XXXXXX", mr_test_tmpdir());
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    mr_fs_rmtree(tmpdir, NULL);
    return 0;
}

static char *tmp_path(const char *name)
{
    char *ret_ = mr_path_join(tmpdir, name);
    assert_alloc(ret_);
    return ret_;
}

#define CHECK_OK(expr)                                                                     \
    do {                                                                                   \
        mr_status st_ = (expr);                                                            \
        if (st_ != MR_OK) {                                                                \
            char b_[1200];                                                                 \
            mr_error_format(&err, b_, sizeof b_);                                          \
            fail_msg("%s failed: %s: %s", #expr, mr_status_name(st_), b_);                 \
        }                                                                                  \
    } while (0)

/* ---- thrift ---------------------------------------------------------------- */

static void test_thrift_roundtrip(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    mr__tc_writer w;
    mr__tc_writer_init(&w, &b);
    mr__tc_write_struct_begin(&w);
    mr__tc_write_i32_field(&w, 1, -5);
    mr__tc_write_i64_field(&w, 2, INT64_MIN);
    mr__tc_write_bool_field(&w, 3, 1);
    mr__tc_write_bool_field(&w, 4, 0);
    mr__tc_write_binary_field(&w, 40, "hello", 5); /* delta > 15: long form */
    mr__tc_write_field(&w, 41, MR__TC_LIST);
    mr__tc_write_list_begin(&w, MR__TC_I32, 20);
    for (int i = 0; i < 20; i++) mr__tc_write_i32(&w, i * 1000 - 7);
    mr__tc_write_field(&w, 42, MR__TC_STRUCT); /* unknown nested struct, to be skipped */
    mr__tc_write_struct_begin(&w);
    mr__tc_write_i32_field(&w, 7, 1);
    mr__tc_write_field(&w, 8, MR__TC_LIST);
    mr__tc_write_list_begin(&w, MR__TC_BINARY, 2);
    mr__tc_write_binary(&w, "a", 1);
    mr__tc_write_binary(&w, "bc", 2);
    mr__tc_write_struct_end(&w);
    mr__tc_write_i32_field(&w, 43, INT32_MAX);
    mr__tc_write_struct_end(&w);
    assert_ok(w.rc);

    mr__tc_reader r;
    mr__tc_reader_init(&r, b.data, b.len);
    int16_t last = 0;
    int fid, t, seen = 0;
    mr__tc_struct_begin(&r);
    while (mr__tc_field_next(&r, &last, &fid, &t)) {
        switch (fid) {
        case 1: assert_int_equal(mr__tc_read_i32(&r), -5); break;
        case 2: assert_true(mr__tc_read_i64(&r) == INT64_MIN); break;
        case 3: assert_true(mr__tc_field_bool(t)); break;
        case 4: assert_false(mr__tc_field_bool(t)); break;
        case 40: {
            size_t n;
            const uint8_t *p = mr__tc_read_binary(&r, &n);
            assert_int_equal(n, 5);
            assert_memory_equal(p, "hello", 5);
            break;
        }
        case 41: {
            int et;
            size_t n;
            mr__tc_list_begin(&r, &et, &n);
            assert_int_equal(et, MR__TC_I32);
            assert_int_equal(n, 20);
            for (size_t i = 0; i < n; i++) assert_int_equal(mr__tc_read_i32(&r), (int)i * 1000 - 7);
            mr__tc_list_end(&r);
            break;
        }
        case 43: assert_int_equal(mr__tc_read_i32(&r), INT32_MAX); break;
        default: mr__tc_skip(&r, t); break;
        }
        seen++;
    }
    mr__tc_struct_end(&r);
    assert_false(r.bad);
    assert_int_equal(seen, 8);
    assert_ptr_equal(r.p, (const uint8_t *)b.data + b.len);

    /* every truncation fails cleanly */
    for (size_t cut = 0; cut < b.len; cut++) {
        mr__tc_reader_init(&r, b.data, cut);
        last = 0;
        mr__tc_skip(&r, MR__TC_STRUCT);
        assert_true(r.bad);
    }
    mr_buf_free(&b);
}

static void test_thrift_skip_and_limits(void **state)
{
    (void)state;
    /* struct { 1: map<i32,binary> {1:"x"}, 2: set<i64> {5}, 3: double, 4: byte, 5: i16 } */
    const uint8_t ok[] = {0x1b, 0x01, 0x58, 0x02, 0x01, 'x',                    /* map */
                          0x1a, 0x16, 0x0a,                                     /* set */
                          0x17, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f,                   /* double 1.0 */
                          0x13, 0x7f,                                           /* byte */
                          0x14, 0x04,                                           /* i16 */
                          0x19, 0x21, 0x01,                                     /* list<bool> [true, false]: 2 elems */
                          0x02,
                          0x00};
    mr__tc_reader r;
    mr__tc_reader_init(&r, ok, sizeof ok);
    mr__tc_skip(&r, MR__TC_STRUCT);
    assert_false(r.bad);
    assert_ptr_equal(r.p, ok + sizeof ok);

    /* nesting bomb: 1000 nested structs -> fails, no stack overflow */
    uint8_t bomb[2000];
    for (int i = 0; i < 1000; i++) bomb[i] = 0x1c; /* field 1, struct */
    memset(bomb + 1000, 0, 1000);
    mr__tc_reader_init(&r, bomb, sizeof bomb);
    mr__tc_skip(&r, MR__TC_STRUCT);
    assert_true(r.bad);

    /* list claiming more elements than bytes */
    const uint8_t biglist[] = {0x19, 0xf5, 0xff, 0xff, 0xff, 0x0f, 0x00};
    mr__tc_reader_init(&r, biglist, sizeof biglist);
    mr__tc_skip(&r, MR__TC_STRUCT);
    assert_true(r.bad);

    /* overlong varint, bad type id */
    const uint8_t longvar[] = {0x15, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00};
    mr__tc_reader_init(&r, longvar, sizeof longvar);
    mr__tc_skip(&r, MR__TC_STRUCT);
    assert_true(r.bad);
    const uint8_t badtype[] = {0x1e, 0x00};
    mr__tc_reader_init(&r, badtype, sizeof badtype);
    mr__tc_skip(&r, MR__TC_STRUCT);
    assert_true(r.bad);
    /* i32 out of range */
    const uint8_t big32[] = {0xfe, 0xff, 0xff, 0xff, 0x1f};
    mr__tc_reader_init(&r, big32, sizeof big32);
    (void)mr__tc_read_i32(&r);
    assert_true(r.bad);
}

/* ---- RLE hybrid ------------------------------------------------------------------ */

static void test_rle_hybrid(void **state)
{
    (void)state;
    uint64_t x = 12345;
    printf("seed 12345\n");
    for (unsigned bw = 1; bw <= 32; bw += (bw < 4 ? 1 : 5)) {
        size_t n = 3000;
        uint32_t *v = mr_malloc(n * sizeof(uint32_t)), *d = mr_malloc(n * sizeof(uint32_t));
        assert_alloc(v);
        assert_alloc(d);
        uint32_t mask = bw == 32 ? 0xffffffffu : (1u << bw) - 1;
        for (size_t i = 0; i < n; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            /* mix runs and literals */
            v[i] = (i / 50) % 2 ? (uint32_t)(i / 100) & mask : (uint32_t)x & mask;
        }
        mr_buf b;
        mr_buf_init(&b);
        assert_ok(mr__pq_rle_encode(v, n, bw, &b));
        assert_int_equal(mr__pq_rle_decode((const uint8_t *)b.data, b.len, bw, d, n), 0);
        assert_memory_equal(v, d, n * sizeof(uint32_t));
        /* truncated input never succeeds with garbage past the end */
        for (size_t cut = 0; cut + 1 < b.len; cut += 97)
            (void)mr__pq_rle_decode((const uint8_t *)b.data, cut, bw, d, n);
        mr_buf_free(&b);
        mr_free(v);
        mr_free(d);
    }
    uint8_t lv[777];
    uint32_t out[777];
    for (size_t i = 0; i < 777; i++) lv[i] = i % 13 != 0;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr__pq_rle_encode_u8(lv, 777, 1, &b));
    assert_int_equal(mr__pq_rle_decode((const uint8_t *)b.data, b.len, 1, out, 777), 0);
    for (size_t i = 0; i < 777; i++) assert_int_equal(out[i], lv[i]);
    mr_buf_free(&b);
}

/* ---- table helpers ------------------------------------------------------------------- */

static mr_table *make_table(size_t n, uint64_t seed, int with_nulls)
{
    mr_error err;
    mr_error_init(&err);
    mr_table *t;
    CHECK_OK(mr_table_new(&t, &err));
    const char *names[] = {"b", "i", "f64", "f32", "s", "cat", "d", "ts", "lowcard"};
    mr_dtype types[] = {MR_T_BOOL, MR_T_INT64, MR_T_FLOAT64, MR_T_FLOAT32, MR_T_STRING, MR_T_STRING, MR_T_DATE, MR_T_TIMESTAMP, MR_T_STRING};
    mr_column *c[9];
    for (int k = 0; k < 9; k++) {
        if (k == 5) {
            mr_column *d;
            CHECK_OK(mr_column_new("dict", MR_T_STRING, 0, &d, &err));
            const char *v[] = {"alpha", "", "gamma,delta", "\xc3\xa9t\xc3\xa9"};
            for (int j = 0; j < 4; j++) assert_ok(mr_column_append_str(d, v[j], strlen(v[j])));
            CHECK_OK(mr_column_new_dict(names[k], d, n, &c[k], &err));
        } else {
            CHECK_OK(mr_column_new(names[k], types[k], n, &c[k], &err));
        }
    }
    uint64_t x = seed;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int nl = with_nulls && (x >> 40) % 6 == 0;
        char s[40];
        int sl = snprintf(s, sizeof s, "str-%llu", (unsigned long long)(x % 100003));
        if (i % 17 == 0) sl = 0;
        assert_ok(nl ? mr_column_append_null(c[0]) : mr_column_append_bool(c[0], (int)(x & 1)));
        assert_ok(nl ? mr_column_append_null(c[1]) : mr_column_append_int64(c[1], (int64_t)x));
        double dv = (double)(int64_t)x / 3.0;
        if (i == 5) dv = -0.0;
        if (i == 6) dv = NAN;
        if (i == 7) dv = INFINITY;
        assert_ok(nl ? mr_column_append_null(c[2]) : mr_column_append_float64(c[2], dv));
        assert_ok(nl ? mr_column_append_null(c[3]) : mr_column_append_float32(c[3], (float)dv));
        assert_ok(nl ? mr_column_append_null(c[4]) : mr_column_append_str(c[4], s, (size_t)sl));
        assert_ok(nl && i % 2 ? mr_column_append_null(c[5]) : mr_column_append_code(c[5], (int32_t)(x % 4)));
        assert_ok(nl ? mr_column_append_null(c[6]) : mr_column_append_int32(c[6], (int32_t)(x % 100000) - 50000));
        assert_ok(nl ? mr_column_append_null(c[7]) : mr_column_append_int64(c[7], (int64_t)(x >> 8) - ((int64_t)1 << 54)));
        const char *lc[] = {"north", "south", "east", "west", ""};
        const char *l = lc[x % 5];
        assert_ok(nl ? mr_column_append_null(c[8]) : mr_column_append_str(c[8], l, strlen(l)));
    }
    for (int k = 0; k < 9; k++) CHECK_OK(mr_table_add_column(t, c[k], &err));
    return t;
}

static void assert_tables_equal(const mr_table *a, const mr_table *b)
{
    assert_int_equal(a->n_cols, b->n_cols);
    assert_int_equal(a->n_rows, b->n_rows);
    for (size_t j = 0; j < a->n_cols; j++) {
        const mr_column *x = a->cols[j], *y = b->cols[j];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->type, y->type);
        for (size_t i = 0; i < a->n_rows; i++) {
            int nx = mr_column_is_null(x, i), ny = mr_column_is_null(y, i);
            if (nx != ny) fail_msg("column '%s' row %zu: null %d vs %d", x->name, i, nx, ny);
            if (nx) continue;
            int eq = 1;
            switch (x->type) {
            case MR_T_BOOL: eq = ((uint8_t *)x->data)[i] == ((uint8_t *)y->data)[i]; break;
            case MR_T_INT64:
            case MR_T_TIMESTAMP: eq = ((int64_t *)x->data)[i] == ((int64_t *)y->data)[i]; break;
            case MR_T_DATE: eq = ((int32_t *)x->data)[i] == ((int32_t *)y->data)[i]; break;
            case MR_T_FLOAT64: eq = !memcmp((double *)x->data + i, (double *)y->data + i, 8); break;
            case MR_T_FLOAT32: eq = !memcmp((float *)x->data + i, (float *)y->data + i, 4); break;
            case MR_T_STRING: {
                size_t lx, ly;
                const char *sx = mr_column_str(x, i, &lx), *sy = mr_column_str(y, i, &ly);
                eq = lx == ly && (!lx || !memcmp(sx, sy, lx));
                break;
            }
            default: break;
            }
            if (!eq) {
                mr_buf bx, by;
                mr_buf_init(&bx);
                mr_buf_init(&by);
                assert_ok(mr_column_format(x, i, &bx));
                assert_ok(mr_column_format(y, i, &by));
                fail_msg("column '%s' row %zu: '%s' vs '%s'", x->name, i, bx.data, by.data);
            }
        }
    }
}

/* ---- round trips ------------------------------------------------------------------------ */

static void test_roundtrip_codecs(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_parquet_codec codecs[] = {MR_PQ_UNCOMPRESSED, MR_PQ_SNAPPY, MR_PQ_GZIP, MR_PQ_ZSTD, MR_PQ_LZ4_RAW};
    mr_table *t1 = make_table(2500, 0x9e3779b97f4a7c15ULL, 1);
    mr_table *t2 = make_table(700, 42, 0);
    for (size_t k = 0; k < sizeof codecs / sizeof codecs[0]; k++) {
        char *path = tmp_path("rt.parquet");
        mr_parquet_write_opts o;
        mr_parquet_write_opts_init(&o);
        o.codec = codecs[k];
        o.row_group_rows = 1000;
        o.page_bytes = 4096; /* several pages per chunk */
        const char *keys[] = {"k1", "k2"}, *vals[] = {"v1", NULL};
        o.kv_keys = keys;
        o.kv_values = vals;
        o.n_kv = 2;
        mr_parquet_writer *w;
        CHECK_OK(mr_parquet_writer_open(path, &o, &w, &err));
        CHECK_OK(mr_parquet_writer_write(w, t1, &err));
        CHECK_OK(mr_parquet_writer_write(w, t2, &err));
        CHECK_OK(mr_parquet_writer_close(w, &err));

        mr_parquet_file *f;
        CHECK_OK(mr_parquet_open(path, &f, &err));
        assert_int_equal(mr_parquet_num_rows(f), 3200);
        assert_int_equal(mr_parquet_num_row_groups(f), 4); /* 1000, 1000, 500, 700 */
        assert_int_equal(mr_parquet_row_group_rows(f, 2), 500);
        assert_int_equal(mr_parquet_row_group_rows(f, 3), 700);
        mr_parquet_codec cc;
        assert_ok(mr_parquet_chunk_codec(f, 0, 0, &cc));
        assert_int_equal(cc, codecs[k]);
        assert_string_equal(mr_parquet_created_by(f), "millrace " "0.1.0");
        assert_int_equal(mr_parquet_num_kv(f), 2);
        const char *v;
        assert_string_equal(mr_parquet_kv(f, 0, &v), "k1");
        assert_string_equal(v, "v1");
        assert_string_equal(mr_parquet_kv(f, 1, &v), "k2");
        assert_null(v);
        const mr_parquet_column_info *ci = mr_parquet_column(f, 7);
        assert_string_equal(ci->logical, "TIMESTAMP(MICROS,UTC)");
        assert_int_equal(ci->dtype, MR_T_TIMESTAMP);

        /* first row group alone, dictionary columns stay dictionary-encoded */
        mr_table *g0;
        CHECK_OK(mr_parquet_read_row_group(f, 0, NULL, 0, &g0, &err));
        mr_table *e0;
        CHECK_OK(mr_table_slice(t1, 0, 1000, &e0, &err));
        assert_tables_equal(e0, g0);
        assert_non_null(mr_table_column(g0, "cat")->codes);
        assert_non_null(mr_table_column(g0, "lowcard")->codes); /* dictionary built by the writer */
        assert_null(mr_table_column(g0, "s")->codes);          /* high cardinality: PLAIN */
        mr_table_free(g0);
        mr_table_free(e0);

        mr_table *all;
        CHECK_OK(mr_parquet_read_all(f, NULL, 0, &all, &err));
        mr_table *exp;
        CHECK_OK(mr_table_slice(t1, 0, t1->n_rows, &exp, &err));
        CHECK_OK(mr_table_append(exp, t2, &err));
        assert_tables_equal(exp, all);
        mr_table_free(exp);
        mr_table_free(all);

        /* column subset, in a chosen order */
        size_t cols[] = {4, 1};
        mr_table *sub;
        CHECK_OK(mr_parquet_read_row_group(f, 3, cols, 2, &sub, &err));
        assert_int_equal(sub->n_cols, 2);
        assert_string_equal(sub->cols[0]->name, "s");
        assert_string_equal(sub->cols[1]->name, "i");
        assert_int_equal(((int64_t *)sub->cols[1]->data)[0], ((int64_t *)t2->cols[1]->data)[0]);
        mr_table_free(sub);
        mr_parquet_close(f);
        mr_free(path);
    }
    mr_table_free(t1);
    mr_table_free(t2);
}

static void test_stats(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_table *t = make_table(300, 7, 1);
    char *path = tmp_path("stats.parquet");
    CHECK_OK(mr_parquet_write_table(path, t, NULL, &err));
    mr_parquet_file *f;
    CHECK_OK(mr_parquet_open(path, &f, &err));
    for (size_t j = 0; j < t->n_cols; j++) {
        const mr_column *c = t->cols[j];
        mr_parquet_stats s;
        CHECK_OK(mr_parquet_column_stats(f, 0, j, &s, &err));
        assert_true(s.has_null_count);
        assert_int_equal(s.null_count, c->null_count);
        assert_int_equal(s.num_values, 300);
        assert_true(s.has_min_max);
        /* recompute */
        int64_t mi = INT64_MAX, ma = INT64_MIN;
        double md = INFINITY, Md = -INFINITY;
        for (size_t i = 0; i < c->n; i++) {
            if (mr_column_is_null(c, i)) continue;
            if (c->type == MR_T_INT64 || c->type == MR_T_TIMESTAMP) {
                int64_t v = ((int64_t *)c->data)[i];
                mi = v < mi ? v : mi, ma = v > ma ? v : ma;
            } else if (c->type == MR_T_DATE) {
                int64_t v = ((int32_t *)c->data)[i];
                mi = v < mi ? v : mi, ma = v > ma ? v : ma;
            } else if (c->type == MR_T_FLOAT64) {
                double v = ((double *)c->data)[i];
                if (isnan(v)) continue;
                md = v < md ? v : md, Md = v > Md ? v : Md;
            }
        }
        if (c->type == MR_T_INT64 || c->type == MR_T_TIMESTAMP || c->type == MR_T_DATE) {
            assert_int_equal(s.kind, MR_PQ_STAT_INT);
            assert_true(s.min_i == mi && s.max_i == ma);
        } else if (c->type == MR_T_FLOAT64) {
            assert_int_equal(s.kind, MR_PQ_STAT_DOUBLE);
            assert_true(s.min_d == md && s.max_d == Md);
        } else if (c->type == MR_T_STRING) {
            assert_int_equal(s.kind, MR_PQ_STAT_STRING);
        }
    }
    mr_parquet_stats s;
    CHECK_OK(mr_parquet_column_stats(f, 0, 8, &s, &err)); /* lowcard */
    assert_int_equal(s.min_len, 0);
    assert_int_equal(s.max_len, 4);
    assert_memory_equal(s.max_s, "west", 4);
    assert_status(mr_parquet_column_stats(f, 1, 0, &s, &err), MR_E_INVALID_ARG);
    mr_error_clear(&err);
    mr_parquet_close(f);
    mr_free(path);
    mr_table_free(t);
}

static void test_empty_and_errors(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    /* empty table: one empty row group, schema preserved */
    mr_table *t = make_table(0, 1, 0);
    char *path = tmp_path("empty.parquet");
    CHECK_OK(mr_parquet_write_table(path, t, NULL, &err));
    mr_parquet_file *f;
    CHECK_OK(mr_parquet_open(path, &f, &err));
    assert_int_equal(mr_parquet_num_rows(f), 0);
    mr_table *r;
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &r, &err));
    assert_int_equal(r->n_rows, 0);
    assert_int_equal(r->n_cols, 9);
    mr_table_free(r);
    mr_parquet_close(f);

    /* unwritable path */
    mr_parquet_writer *w = NULL;
    assert_status(mr_parquet_writer_open("/nonexistent-dir/x.parquet", NULL, &w, &err), MR_E_IO);
    assert_null(w);
    assert_non_null(strstr(err.file, "nonexistent"));
    mr_error_clear(&err);

    /* schema mismatch on a second write, then sticky failure */
    CHECK_OK(mr_parquet_writer_open(path, NULL, &w, &err));
    mr_table *t2 = make_table(10, 3, 0);
    CHECK_OK(mr_parquet_writer_write(w, t2, &err));
    assert_ok(mr_table_project(t2, (const char *const[]){"i", "b"}, 2, &err));
    assert_status(mr_parquet_writer_write(w, t2, &err), MR_E_SCHEMA);
    mr_error_clear(&err);
    assert_status(mr_parquet_writer_write(w, t2, &err), MR_E_STATE);
    mr_error_clear(&err);
    assert_status(mr_parquet_writer_close(w, &err), MR_E_STATE);
    mr_error_clear(&err);
    assert_true(mr_fs_exists(path)); /* partial file left for the caller */

    /* not a parquet file */
    assert_ok(mr_fs_write_atomic(path, "hello world, not parquet", 24, &err));
    assert_status(mr_parquet_open(path, &f, &err), MR_E_CORRUPT);
    assert_non_null(strstr(err.msg, "PAR1"));
    mr_error_clear(&err);
    assert_status(mr_parquet_open("/nonexistent.parquet", &f, &err), MR_E_NOT_FOUND);
    mr_error_clear(&err);
    mr_parquet_codec c;
    assert_ok(mr_parquet_codec_parse("ZSTD", &c));
    assert_int_equal(c, MR_PQ_ZSTD);
    assert_ok(mr_parquet_codec_parse("lz4_raw", &c));
    assert_int_equal(c, MR_PQ_LZ4_RAW);
    assert_ok(mr_parquet_codec_parse("LZ4", &c)); /* written as LZ4_RAW */
    assert_int_equal(c, MR_PQ_LZ4_RAW);
    assert_status(mr_parquet_codec_parse("lzo", &c), MR_E_NOT_FOUND);
    mr_table_free(t);
    mr_table_free(t2);
    mr_free(path);
}

/* Truncations and byte flips of a valid file must give errors, never crashes
 * (run under ASan/UBSan to make that meaningful). */
static void test_corrupt_inputs(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_table *t = make_table(120, 99, 1);
    char *path = tmp_path("c.parquet");
    mr_parquet_write_opts o;
    mr_parquet_write_opts_init(&o);
    o.codec = MR_PQ_SNAPPY;
    o.row_group_rows = 50;
    CHECK_OK(mr_parquet_write_table(path, t, &o, &err));
    char *data;
    size_t len;
    CHECK_OK(mr_fs_read_file(path, 1 << 24, &data, &len, &err));
    uint8_t *copy = mr_malloc(len);
    assert_alloc(copy);
    int n_err = 0, n_ok = 0;
    uint64_t x = 777;
    for (size_t trial = 0; trial < 1500; trial++) {
        memcpy(copy, data, len);
        size_t use = len;
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (trial < 300) use = (size_t)(x % len);
        else
            for (int k = 0; k < 1 + (int)(trial % 4); k++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                copy[x % len] ^= (uint8_t)(1u << ((x >> 32) % 8));
            }
        mr_parquet_file *f = NULL;
        mr_error_clear(&err);
        if (mr_parquet_open_mem(copy, use, "mem.parquet", &f, &err) != MR_OK) {
            n_err++;
            continue;
        }
        for (size_t g = 0; g < mr_parquet_num_row_groups(f); g++) {
            mr_table *r = NULL;
            if (mr_parquet_row_group_rows(f, g) > 100000) continue;
            mr_status st = mr_parquet_read_row_group(f, g, NULL, 0, &r, &err);
            if (st == MR_OK) n_ok++;
            else {
                n_err++;
                assert_true(err.msg[0] != '\0');
            }
            mr_error_clear(&err);
            mr_table_free(r);
            mr_parquet_stats s;
            for (size_t j = 0; j < mr_parquet_num_columns(f); j++) (void)mr_parquet_column_stats(f, g, j, &s, NULL);
        }
        mr_parquet_close(f);
    }
    assert_true(n_err > 300);
    mr_free(copy);
    mr_free(data);
    mr_free(path);
    mr_table_free(t);
}


/* ---- exact types: kinds and decimals ----------------------------------------- */

static mr_column *int_col(const char *name, mr_colkind k, const int64_t *v, size_t n)
{
    mr_column *c = NULL;
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_column_new(name, k.precision ? MR_T_DECIMAL : MR_T_INT64, n, &c, &err));
    c->kind = k;
    for (size_t i = 0; i < n; i++) assert_ok(mr_column_append_int64(c, v[i]));
    assert_ok(mr_column_append_null(c));
    return c;
}

/* Every kind is written as the Parquet type it came as and read back with
 * the same kind and values: narrow and unsigned integers, bytes, naive
 * timestamps, decimals in INT64 and (past 18 digits) FIXED_LEN_BYTE_ARRAY. */
static void test_kinds_roundtrip(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_table *t = NULL;
    assert_ok(mr_table_new(&t, &err));
    const int64_t i8[] = {-128, 0, 127}, i16[] = {-32768, 5, 32767}, i32[] = {INT32_MIN, 7, INT32_MAX};
    const int64_t u8[] = {0, 200, 255}, u32[] = {0, 3000000000LL, 4294967295LL}, u64[] = {0, 1, INT64_MAX};
    const int64_t d92[] = {-9999999, 12345, 0}, d253[] = {-INT64_MAX, 1, INT64_MAX};
    struct { const char *name; mr_colkind k; const int64_t *v; const char *logical; int phys; } ints[] = {
        {"i8", {.int_bits = 8}, i8, "INT(8,signed)", MR_PQ_INT32},
        {"i16", {.int_bits = 16}, i16, "INT(16,signed)", MR_PQ_INT32},
        {"i32", {.int_bits = 32}, i32, "INT(32,signed)", MR_PQ_INT32},
        {"u8", {.int_bits = 8, .flags = MR_KIND_UNSIGNED}, u8, "INT(8,unsigned)", MR_PQ_INT32},
        {"u32", {.int_bits = 32, .flags = MR_KIND_UNSIGNED}, u32, "INT(32,unsigned)", MR_PQ_INT32},
        {"u64", {.flags = MR_KIND_UNSIGNED}, u64, "INT(64,unsigned)", MR_PQ_INT64},
        {"d92", {.precision = 9, .scale = 2}, d92, "DECIMAL(9,2)", MR_PQ_INT64},
        {"d253", {.precision = 25, .scale = 3}, d253, "DECIMAL(25,3)", MR_PQ_FIXED_LEN_BYTE_ARRAY},
    };
    size_t n_ints = sizeof ints / sizeof ints[0];
    for (size_t j = 0; j < n_ints; j++) assert_ok(mr_table_add_column(t, int_col(ints[j].name, ints[j].k, ints[j].v, 3), &err));
    mr_column *bin = NULL, *ts = NULL;
    assert_ok(mr_column_new("bin", MR_T_STRING, 4, &bin, &err));
    bin->kind.flags = MR_KIND_BINARY;
    assert_ok(mr_column_append_str(bin, "\x00\xff", 2));
    assert_ok(mr_column_append_str(bin, "", 0));
    assert_ok(mr_column_append_str(bin, "abc", 3));
    assert_ok(mr_column_append_null(bin));
    assert_ok(mr_table_add_column(t, bin, &err));
    assert_ok(mr_column_new("ts", MR_T_TIMESTAMP, 4, &ts, &err));
    ts->kind.flags = MR_KIND_LOCAL;
    for (int i = 0; i < 3; i++) assert_ok(mr_column_append_int64(ts, 1709294400000000LL + i));
    assert_ok(mr_column_append_null(ts));
    assert_ok(mr_table_add_column(t, ts, &err));

    char *p = tmp_path("kinds.parquet");
    CHECK_OK(mr_parquet_write_table(p, t, NULL, &err));
    mr_parquet_file *f = NULL;
    CHECK_OK(mr_parquet_open(p, &f, &err));
    for (size_t j = 0; j < n_ints; j++) {
        const mr_parquet_column_info *ci = mr_parquet_column(f, j);
        assert_string_equal(ci->logical, ints[j].logical);
        assert_int_equal(ci->physical, ints[j].phys);
    }
    assert_string_equal(mr_parquet_column(f, n_ints + 1)->logical, "TIMESTAMP(MICROS)"); /* not UTC */
    assert_string_equal(mr_parquet_column(f, n_ints)->logical, "");                     /* bytes: no STRING */
    mr_table *r = NULL;
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &r, &err));
    assert_int_equal(r->n_cols, t->n_cols);
    for (size_t j = 0; j < t->n_cols; j++) {
        char a[40], b[40];
        const mr_column *x = t->cols[j], *y = r->cols[j];
        assert_string_equal(mr_kind_name(y->type, y->kind, b, sizeof b), mr_kind_name(x->type, x->kind, a, sizeof a));
        assert_true(memcmp(&x->kind, &y->kind, sizeof x->kind) == 0);
    }
    mr_hash128 hr = mr_table_content_hash(r), ht = mr_table_content_hash(t); /* values, nulls and kinds */
    assert_status((hr.lo | hr.hi) && (ht.lo | ht.hi) ? MR_OK : MR_E_NOMEM, MR_OK); /* {0, 0}: out of memory */
    assert_true(hr.lo == ht.lo && hr.hi == ht.hi);
    mr_buf v;
    mr_buf_init(&v);
    assert_ok(mr_column_format(r->cols[6], 0, &v));
    assert_string_equal(v.data, "-99999.99");
    v.len = 0;
    assert_ok(mr_column_format(r->cols[7], 0, &v));
    assert_string_equal(v.data, "-9223372036854775.807");
    mr_buf_free(&v);
    mr_table_free(r);
    mr_parquet_close(f);

    /* a value its kind cannot hold is refused, not wrapped */
    ((int64_t *)t->cols[0]->data)[1] = 128;
    assert_status(mr_parquet_write_table(p, t, NULL, &err), MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "the value 128 (row 1) does not fit its type int8"));
    ((int64_t *)t->cols[0]->data)[1] = 0;
    /* decimals of another scale cannot follow in one file */
    mr_parquet_writer *w = NULL;
    mr_error_init(&err);
    CHECK_OK(mr_parquet_writer_open(p, NULL, &w, &err));
    CHECK_OK(mr_parquet_writer_write(w, t, &err));
    t->cols[6]->kind.scale = 3;
    assert_status(mr_parquet_writer_write(w, t, &err), MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "column 'd92' is decimal(9,3), the file has decimal(9,2)"));
    mr_parquet_writer_free(w);
    mr_free(p);
    mr_table_free(t);
}

static void test_decimal_text(void **state)
{
    (void)state;
    struct { int64_t u; unsigned scale; const char *text; } cases[] = {
        {12345, 2, "123.45"}, {-5, 3, "-0.005"}, {0, 2, "0.00"}, {7, 0, "7"},
        {INT64_MIN, 4, "-922337203685477.5808"}, {INT64_MAX, 18, "9.223372036854775807"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        mr_buf b;
        mr_buf_init(&b);
        assert_ok(mr_decimal_format(cases[k].u, cases[k].scale, &b));
        assert_string_equal(b.data, cases[k].text);
        int64_t back;
        assert_int_equal(mr_decimal_parse(b.data, b.len, cases[k].scale, &back), 0);
        assert_true(back == cases[k].u);
        mr_buf_free(&b);
    }
    int64_t u;
    assert_int_equal(mr_decimal_parse("1.5", 3, 2, &u), 0);
    assert_true(u == 150);
    assert_int_equal(mr_decimal_parse("1.500", 5, 2, &u), 0); /* trailing zeros are exact */
    assert_true(u == 150);
    assert_int_equal(mr_decimal_parse("1.505", 5, 2, &u), -1); /* would round */
    assert_int_equal(mr_decimal_parse("9223372036854775808", 19, 0, &u), -1);
    assert_int_equal(mr_decimal_parse("-9223372036854775808", 20, 0, &u), 0);
    assert_true(u == INT64_MIN);
    assert_int_equal(mr_decimal_parse("1e5", 3, 0, &u), -1);
    assert_int_equal(mr_decimal_parse(".", 1, 0, &u), -1);
    assert_true(mr_decimal_to_f64(12345, 2) == 123.45);
    /* names round trip through the parser */
    const char *names[] = {"int8", "int16", "int32", "uint8", "uint16", "uint32", "uint64", "binary",
                           "timestamp_local", "decimal(38,10)", "decimal(1,0)", "int64", "string", "timestamp"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        mr_dtype t;
        mr_colkind kd;
        char buf[40];
        assert_ok(mr_kind_parse(names[k], &t, &kd));
        assert_string_equal(mr_kind_name(t, kd, buf, sizeof buf), names[k]);
    }
    mr_dtype t;
    mr_colkind kd;
    assert_int_equal(mr_kind_parse("decimal(39,2)", &t, &kd), MR_E_NOT_FOUND);
    assert_int_equal(mr_kind_parse("decimal(4,5)", &t, &kd), MR_E_NOT_FOUND);
    assert_int_equal(mr_kind_parse("decimal", &t, &kd), MR_E_NOT_FOUND);
    assert_int_equal(mr_kind_parse("decimal(4,2)x", &t, &kd), MR_E_NOT_FOUND);
}

/* ---- apache/parquet-testing --------------------------------------------------------- */

/* Minimal RFC 4180 reader: returns cells of one line; an unquoted empty cell is NULL. */
typedef struct csv_cell {
    char *s;
    size_t len;
    int is_null;
} csv_cell;

static size_t csv_line(const char **pp, const char *end, csv_cell *cells, size_t max, mr_buf *store, size_t *offs)
{
    const char *p = *pp;
    size_t n = 0;
    store->len = 0;
    for (;;) {
        int quoted = 0;
        size_t start = store->len;
        if (p < end && *p == '"') {
            quoted = 1;
            p++;
            while (p < end) {
                if (*p == '"') {
                    if (p + 1 < end && p[1] == '"') {
                        assert_ok(mr_buf_append(store, "\"", 1));
                        p += 2;
                        continue;
                    }
                    p++;
                    break;
                }
                assert_ok(mr_buf_append(store, p++, 1));
            }
        } else {
            while (p < end && *p != ',' && *p != '\n' && *p != '\r') assert_ok(mr_buf_append(store, p++, 1));
        }
        if (n < max) {
            offs[n] = start;
            cells[n].len = store->len - start;
            cells[n].is_null = !quoted && store->len == start;
        }
        n++;
        if (p < end && *p == ',') {
            p++;
            continue;
        }
        while (p < end && (*p == '\r' || *p == '\n')) p++;
        break;
    }
    for (size_t i = 0; i < n && i < max; i++) cells[i].s = store->data + offs[i];
    *pp = p;
    return n;
}

static void compare_expect_csv(const char *dir, const char *pq, const char *csv)
{
    mr_error err;
    mr_error_init(&err);
    char *pp = mr_path_join(dir, pq), *cp = mr_path_join(dir, csv);
    assert_alloc(pp);
    mr_parquet_file *f;
    CHECK_OK(mr_parquet_open(pp, &f, &err));
    mr_table *t;
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    char *data;
    size_t len;
    CHECK_OK(mr_fs_read_file(cp, 1 << 26, &data, &len, &err));
    const char *p = data, *end = data + len;
    csv_cell cells[128];
    size_t offs[128];
    mr_buf store, fmt;
    mr_buf_init(&store);
    mr_buf_init(&fmt);
    size_t nh = csv_line(&p, end, cells, 128, &store, offs);
    assert_int_equal(nh, t->n_cols);
    size_t row = 0;
    while (p < end) {
        size_t n = csv_line(&p, end, cells, 128, &store, offs);
        if (n == 1 && cells[0].is_null) continue;
        assert_int_equal(n, t->n_cols);
        assert_true(row < t->n_rows);
        for (size_t j = 0; j < n; j++) {
            const mr_column *c = t->cols[j];
            int isnull = mr_column_is_null(c, row);
            if (cells[j].is_null != isnull) fail_msg("%s row %zu column '%s': null mismatch", pq, row, c->name);
            if (isnull) continue;
            fmt.len = 0;
            assert_ok(mr_column_format(c, row, &fmt));
            if (fmt.len != cells[j].len || memcmp(fmt.data, cells[j].s, fmt.len))
                fail_msg("%s row %zu column '%s': got '%s', expected '%.*s'", pq, row, c->name, fmt.data,
                         (int)cells[j].len, cells[j].s);
        }
        row++;
    }
    assert_int_equal(row, t->n_rows);
    mr_buf_free(&store);
    mr_buf_free(&fmt);
    mr_free(data);
    mr_table_free(t);
    mr_parquet_close(f);
    mr_free(pp);
    mr_free(cp);
}

static int64_t col_i64(const mr_table *t, const char *name, size_t i)
{
    const mr_column *c = mr_table_column(t, name);
    assert_alloc(c);
    return ((const int64_t *)c->data)[i];
}

/* Reads dir/name whole. */
static mr_table *read_fixture(const char *dir, const char *name)
{
    mr_error err;
    mr_error_init(&err);
    char *p = mr_path_join(dir, name);
    assert_alloc(p);
    mr_parquet_file *f;
    CHECK_OK(mr_parquet_open(p, &f, &err));
    mr_table *t = NULL;
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    mr_parquet_close(f);
    mr_free(p);
    return t;
}

/* Every cell of a and b prints the same (names, types, nulls, values). */
static void assert_tables_same(const mr_table *a, const mr_table *b, const char *what)
{
    assert_int_equal(a->n_rows, b->n_rows);
    assert_int_equal(a->n_cols, b->n_cols);
    mr_buf x, y;
    mr_buf_init(&x);
    mr_buf_init(&y);
    for (size_t j = 0; j < a->n_cols; j++) {
        assert_string_equal(a->cols[j]->name, b->cols[j]->name);
        assert_int_equal(a->cols[j]->type, b->cols[j]->type);
        for (size_t i = 0; i < a->n_rows; i++) {
            x.len = y.len = 0;
            assert_int_equal(mr_column_is_null(a->cols[j], i), mr_column_is_null(b->cols[j], i));
            if (mr_column_is_null(a->cols[j], i)) continue;
            assert_ok(mr_column_format(a->cols[j], i, &x));
            assert_ok(mr_column_format(b->cols[j], i, &y));
            if (x.len != y.len || memcmp(x.data, y.data, x.len))
                fail_msg("%s: row %zu column '%s': '%s' vs '%s'", what, i, a->cols[j]->name, x.data, y.data);
        }
    }
    mr_buf_free(&x);
    mr_buf_free(&y);
}

/* LZ4_RAW, and the deprecated LZ4 as Hadoop-framed and as a bare block:
 * the values DuckDB reads from the LZ4_RAW files (it refuses the LZ4 ones),
 * and each LZ4 file equal to its LZ4_RAW twin. */
static void check_lz4_fixtures(const char *dir)
{
    mr_table *raw = read_fixture(dir, "lz4_raw_compressed.parquet");
    static const int64_t c0[] = {1593604800, 1593604800, 1593604801, 1593604801};
    static const char *const c1[] = {"abc", "def", "abc", "def"};
    static const double v11[] = {42, 7.7, 42.125, 7.7};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(col_i64(raw, "c0", i), c0[i]);
        size_t l;
        const char *s = mr_column_str(mr_table_column(raw, "c1"), i, &l);
        assert_int_equal(l, 3);
        assert_memory_equal(s, c1[i], 3);
        assert_true(((const double *)mr_table_column(raw, "v11")->data)[i] == v11[i]);
    }
    mr_table *hadoop = read_fixture(dir, "hadoop_lz4_compressed.parquet");
    mr_table *bare = read_fixture(dir, "non_hadoop_lz4_compressed.parquet");
    assert_tables_same(raw, hadoop, "hadoop_lz4_compressed");
    assert_tables_same(raw, bare, "non_hadoop_lz4_compressed");
    mr_table_free(raw);
    mr_table_free(hadoop);
    mr_table_free(bare);

    raw = read_fixture(dir, "lz4_raw_compressed_larger.parquet");
    const mr_column *a = mr_table_column(raw, "a");
    assert_alloc(a);
    assert_int_equal(a->n, 10000);
    size_t l;
    const char *s = mr_column_str(a, 0, &l);
    assert_int_equal(l, 36);
    assert_memory_equal(s, "c7ce6bef-d5b0-4863-b199-8ea8c7fb117b", 36);
    hadoop = read_fixture(dir, "hadoop_lz4_compressed_larger.parquet");
    assert_tables_same(raw, hadoop, "hadoop_lz4_compressed_larger");
    mr_table_free(raw);
    mr_table_free(hadoop);
}

/* The LZ4 page forms, without fixtures: LZ4_RAW (one block), and for the
 * deprecated LZ4 Hadoop's framing over two blocks, an LZ4 frame and a bare
 * block; a decode to any other size, or garbage, is corruption. */
static void test_lz4_pages(void **state)
{
    (void)state;
    enum { N = 5000 };
    uint8_t *src = mr_malloc(N), *back = mr_malloc(N);
    assert_alloc(src);
    assert_alloc(back);
    for (size_t i = 0; i < N; i++) src[i] = (uint8_t)((i * 7) % 13 + (i / 100));
    int bound = LZ4_compressBound(N);
    uint8_t *blk = mr_malloc((size_t)bound), *had = mr_malloc((size_t)bound * 2 + 16);
    assert_alloc(blk);
    assert_alloc(had);
    int nb = LZ4_compress_default((const char *)src, (char *)blk, N, bound);
    assert_true(nb > 0);
    void *z = NULL;
    const char *why = NULL;
    /* LZ4_RAW and the bare block */
    for (int codec = 0; codec < 2; codec++) {
        mr_parquet_codec c = codec ? MR_PQ_LZ4 : MR_PQ_LZ4_RAW;
        memset(back, 0, N);
        assert_ok(mr__pq_decompress(c, blk, (size_t)nb, back, N, &z, &why));
        assert_memory_equal(back, src, N);
        assert_status(mr__pq_decompress(c, blk, (size_t)nb, back, N - 1, &z, &why), MR_E_CORRUPT);
        assert_status(mr__pq_decompress(c, blk, (size_t)nb / 2, back, N, &z, &why), MR_E_CORRUPT);
    }
    /* Hadoop framing: two blocks, each with its big-endian sizes */
    size_t h = 0;
    const size_t half[2] = {N / 3, N - N / 3};
    size_t off = 0;
    for (int b = 0; b < 2; b++) {
        int k = LZ4_compress_default((const char *)src + off, (char *)had + h + 8, (int)half[b], bound);
        assert_true(k > 0);
        const uint32_t sz[2] = {(uint32_t)half[b], (uint32_t)k};
        for (int q = 0; q < 2; q++)
            for (int byte = 0; byte < 4; byte++) had[h + (size_t)q * 4 + (size_t)byte] = (uint8_t)(sz[q] >> (24 - 8 * byte));
        h += 8 + (size_t)k;
        off += half[b];
    }
    memset(back, 0, N);
    assert_ok(mr__pq_decompress(MR_PQ_LZ4, had, h, back, N, &z, &why));
    assert_memory_equal(back, src, N);
    assert_status(mr__pq_decompress(MR_PQ_LZ4, had, h - 3, back, N, &z, &why), MR_E_CORRUPT);
    /* the LZ4 frame format */
    size_t fb = LZ4F_compressFrameBound(N, NULL);
    uint8_t *fr = mr_malloc(fb);
    assert_alloc(fr);
    size_t nf = LZ4F_compressFrame(fr, fb, src, N, NULL);
    assert_false(LZ4F_isError(nf));
    memset(back, 0, N);
    assert_ok(mr__pq_decompress(MR_PQ_LZ4, fr, nf, back, N, &z, &why));
    assert_memory_equal(back, src, N);
    assert_status(mr__pq_decompress(MR_PQ_LZ4, fr, nf, back, N - 10, &z, &why), MR_E_CORRUPT);
    assert_non_null(strstr(why, "LZ4"));
    /* and LZ4_RAW written by the writer's compressor reads back */
    mr_buf out;
    mr_buf_init(&out);
    assert_ok(mr__pq_compress(MR_PQ_LZ4_RAW, 0, src, N, &out, &z));
    assert_ok(mr__pq_decompress(MR_PQ_LZ4_RAW, (const uint8_t *)out.data, out.len, back, N, &z, &why));
    assert_memory_equal(back, src, N);
    mr_buf_free(&out);
    mr_free(fr);
    mr_free(src);
    mr_free(back);
    mr_free(blk);
    mr_free(had);
}

static void test_parquet_testing(void **state)
{
    (void)state;
    const char *dir = getenv("MILLRACE_PARQUET_TESTING");
    if (!dir || !mr_fs_is_dir(dir)) {
        printf("parquet-testing fixtures not found at %s: real-file tier not run\n", dir ? dir : "(unset)");
        return;
    }
    static const struct { const char *file; int64_t rows; const char *fail; } files[] = {
        {"alltypes_dictionary.parquet", 2, NULL},
        {"alltypes_plain.parquet", 8, NULL},
        {"alltypes_plain.snappy.parquet", 2, NULL},
        {"alltypes_tiny_pages.parquet", 7300, NULL},
        {"alltypes_tiny_pages_plain.parquet", 7300, NULL},
        {"binary.parquet", 12, NULL},
        {"binary_truncated_min_max.parquet", 12, NULL},
        {"byte_array_decimal.parquet", 24, NULL},
        {"byte_stream_split.zstd.parquet", 300, NULL},
        {"byte_stream_split_extended.gzip.parquet", 200, NULL},
        {"column_chunk_key_value_metadata.parquet", 0, NULL},
        {"concatenated_gzip_members.parquet", 513, NULL},
        {"data_index_bloom_encoding_stats.parquet", 14, NULL},
        {"data_index_bloom_encoding_with_length.parquet", 14, NULL},
        {"datapage_v1-snappy-compressed-checksum.parquet", 5120, NULL},
        {"datapage_v1-uncompressed-checksum.parquet", 5120, NULL},
        {"datapage_v2_empty_datapage.snappy.parquet", 1, NULL},
        {"delta_binary_packed.parquet", 200, NULL},
        {"delta_byte_array.parquet", 1000, NULL},
        {"delta_encoding_optional_column.parquet", 100, NULL},
        {"delta_encoding_required_column.parquet", 100, NULL},
        {"delta_length_byte_array.parquet", 1000, NULL},
        {"dict-page-offset-zero.parquet", 39, NULL},
        {"fixed_length_byte_array.parquet", 1000, NULL},
        {"fixed_length_decimal.parquet", 24, NULL},
        {"fixed_length_decimal_legacy.parquet", 24, NULL},
        {"float16_nonzeros_and_nans.parquet", 8, NULL},
        {"float16_zeros_and_nans.parquet", 3, NULL},
        {"floating_orders_nan_count.parquet", 50, NULL},
        {"int32_decimal.parquet", 24, NULL},
        {"int32_with_null_pages.parquet", 1000, NULL},
        {"int64_decimal.parquet", 24, NULL},
        {"int96_from_spark.parquet", 6, NULL},
        {"nan_in_stats.parquet", 2, NULL},
        {"overflow_i16_page_cnt.parquet", 40000, NULL},
        {"page_v2_empty_compressed.parquet", 10, NULL},
        {"plain-dict-uncompressed-checksum.parquet", 1000, NULL},
        {"rle-dict-snappy-checksum.parquet", 1000, NULL},
        {"rle_boolean_encoding.parquet", 68, NULL},
        {"single_nan.parquet", 1, NULL},
        {"sort_columns.parquet", 6, NULL},
        {"unknown-logical-type.parquet", 3, NULL},
        /* LZ4_RAW, and the deprecated LZ4 in Hadoop's framing and as a bare block */
        {"hadoop_lz4_compressed.parquet", 4, NULL},
        {"hadoop_lz4_compressed_larger.parquet", 10000, NULL},
        {"lz4_raw_compressed.parquet", 4, NULL},
        {"lz4_raw_compressed_larger.parquet", 10000, NULL},
        {"non_hadoop_lz4_compressed.parquet", 4, NULL},
        /* deliberately broken */
        {"nation.dict-malformed.parquet", 25, "column 'name'"},
        {"datapage_v1-corrupt-checksum.parquet", 5120, "CRC mismatch"},
        {"rle-dict-uncompressed-corrupt-checksum.parquet", 1000, "CRC mismatch"},
    };
    mr_error err;
    mr_error_init(&err);
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char *p = mr_path_join(dir, files[k].file);
        assert_alloc(p);
        mr_parquet_file *f;
        CHECK_OK(mr_parquet_open(p, &f, &err));
        assert_int_equal(mr_parquet_num_rows(f), files[k].rows);
        mr_table *t = NULL;
        mr_status st = mr_parquet_read_all(f, NULL, 0, &t, &err);
        if (files[k].fail) {
            if (st == MR_OK) fail_msg("%s: expected an error", files[k].file);
            if (!strstr(err.msg, files[k].fail)) fail_msg("%s: error '%s' lacks '%s'", files[k].file, err.msg, files[k].fail);
            assert_non_null(strstr(err.file, files[k].file));
            assert_non_null(strstr(err.msg, "row group 0"));
            mr_error_clear(&err);
        } else {
            if (st != MR_OK) fail_msg("%s: %s", files[k].file, err.msg);
            assert_int_equal(t->n_rows, files[k].rows);
        }
        mr_table_free(t);
        mr_parquet_close(f);
        mr_free(p);
    }
    check_lz4_fixtures(dir);
    /* no rows, two columns (DuckDB: column1, column2): a source gives the
     * columns in a batch of 0 rows, so ingest and export keep them */
    char *kv = mr_path_join(dir, "column_chunk_key_value_metadata.parquet");
    assert_alloc(kv);
    mr_source *src = NULL;
    CHECK_OK(mr_source_open(kv, MR_SRC_AUTO, NULL, &src, &err));
    mr_table *empty = NULL;
    CHECK_OK(mr_source_next(src, 0, &empty, &err));
    assert_non_null(empty);
    assert_int_equal(empty->n_rows, 0);
    assert_int_equal(empty->n_cols, 2);
    assert_string_equal(empty->cols[0]->name, "column1");
    assert_string_equal(empty->cols[1]->name, "column2");
    mr_table_free(empty);
    CHECK_OK(mr_source_next(src, 0, &empty, &err));
    assert_null(empty);
    mr_source_close(src, NULL);
    mr_free(kv);
    compare_expect_csv(dir, "delta_binary_packed.parquet", "delta_binary_packed_expect.csv");
    compare_expect_csv(dir, "delta_byte_array.parquet", "delta_byte_array_expect.csv");
    compare_expect_csv(dir, "delta_encoding_optional_column.parquet", "delta_encoding_optional_column_expect.csv");
    compare_expect_csv(dir, "delta_encoding_required_column.parquet", "delta_encoding_required_column_expect.csv");

    /* alltypes_plain: known values (cross-checked against DuckDB) */
    char *p = mr_path_join(dir, "alltypes_plain.parquet");
    assert_alloc(p);
    mr_parquet_file *f;
    CHECK_OK(mr_parquet_open(p, &f, &err));
    mr_table *t;
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    int64_t ids[] = {4, 5, 6, 7, 2, 3, 0, 1};
    for (size_t i = 0; i < 8; i++) {
        assert_int_equal(col_i64(t, "id", i), ids[i]);
        assert_int_equal(((uint8_t *)mr_table_column(t, "bool_col")->data)[i], i % 2 == 0);
        assert_int_equal(col_i64(t, "bigint_col", i), (int64_t)(i % 2) * 10);
        assert_true(((double *)mr_table_column(t, "double_col")->data)[i] == (i % 2) * 10.1);
        assert_true(((float *)mr_table_column(t, "float_col")->data)[i] == (float)((i % 2) * 1.1));
    }
    const mr_column *ts = mr_table_column(t, "timestamp_col");
    assert_int_equal(ts->type, MR_T_TIMESTAMP);
    assert_int_equal(((int64_t *)ts->data)[0], 1235865600000000LL); /* 2009-03-01 00:00:00 */
    assert_int_equal(((int64_t *)ts->data)[7], 1230768060000000LL); /* 2009-01-01 00:01:00 */
    size_t l;
    const char *s = mr_column_str(mr_table_column(t, "date_string_col"), 0, &l);
    assert_int_equal(l, 8);
    assert_memory_equal(s, "03/01/09", 8);
    mr_parquet_stats st;
    CHECK_OK(mr_parquet_column_stats(f, 0, 0, &st, &err));
    mr_table_free(t);
    mr_parquet_close(f);
    mr_free(p);

    /* int96 beyond the nanosecond range, as Spark reads it */
    p = mr_path_join(dir, "int96_from_spark.parquet");
    assert_alloc(p);
    CHECK_OK(mr_parquet_open(p, &f, &err));
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    int64_t exp96[] = {1704141296123456LL, 1704070800000000LL, 253402225200000000LL, 1735599600000000LL, 0,
                       9089380393200000000LL};
    for (size_t i = 0; i < 6; i++) {
        if (i == 4) assert_true(mr_column_is_null(t->cols[0], i));
        else assert_true(((int64_t *)t->cols[0]->data)[i] == exp96[i]);
    }
    mr_table_free(t);
    mr_parquet_close(f);
    mr_free(p);

    /* decimals, float16, dictionary strings without materialising */
    p = mr_path_join(dir, "int32_decimal.parquet");
    assert_alloc(p);
    CHECK_OK(mr_parquet_open(p, &f, &err));
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    /* exact: DECIMAL(4,2) values 1.00 .. 24.00 as unscaled 100 .. 2400 */
    assert_int_equal(t->cols[0]->type, MR_T_DECIMAL);
    assert_int_equal(t->cols[0]->kind.precision, 4);
    assert_int_equal(t->cols[0]->kind.scale, 2);
    for (size_t i = 0; i < 24; i++) assert_true(((int64_t *)t->cols[0]->data)[i] == (int64_t)(i + 1) * 100);
    mr_table_free(t);
    mr_parquet_close(f);
    mr_free(p);
    const char *decfiles[] = {"int64_decimal.parquet", "byte_array_decimal.parquet", "fixed_length_decimal.parquet",
                              "fixed_length_decimal_legacy.parquet"};
    const int decprec[] = {10, 4, 25, 13}; /* INT64, BYTE_ARRAY, FLBA(11), FLBA(6); all scale 2 */
    for (size_t k = 0; k < 4; k++) {
        p = mr_path_join(dir, decfiles[k]);
        assert_alloc(p);
        CHECK_OK(mr_parquet_open(p, &f, &err));
        CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
        const mr_column *dc = t->cols[0];
        if (dc->type != MR_T_DECIMAL || dc->kind.precision != decprec[k] || dc->kind.scale != 2)
            fail_msg("%s: %s decimal(%u,%u)", decfiles[k], mr_dtype_name(dc->type), dc->kind.precision, dc->kind.scale);
        for (size_t i = 0; i < 24; i++)
            if (((int64_t *)dc->data)[i] != (int64_t)(i + 1) * 100)
                fail_msg("%s row %zu: %lld", decfiles[k], i, (long long)((int64_t *)dc->data)[i]);
        mr_table_free(t);
        mr_parquet_close(f);
        mr_free(p);
    }
    p = mr_path_join(dir, "float16_nonzeros_and_nans.parquet");
    assert_alloc(p);
    CHECK_OK(mr_parquet_open(p, &f, &err));
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    assert_int_equal(t->cols[0]->type, MR_T_FLOAT32);
    assert_true(mr_column_is_null(t->cols[0], 0));
    assert_true(((float *)t->cols[0]->data)[1] == 1.0f);
    assert_true(((float *)t->cols[0]->data)[2] == -2.0f);
    assert_true(isnan(((float *)t->cols[0]->data)[3]));
    mr_table_free(t);
    mr_parquet_close(f);
    mr_free(p);
    p = mr_path_join(dir, "rle-dict-snappy-checksum.parquet");
    assert_alloc(p);
    CHECK_OK(mr_parquet_open(p, &f, &err));
    CHECK_OK(mr_parquet_read_row_group(f, 0, NULL, 0, &t, &err));
    assert_non_null(mr_table_column(t, "binary_field")->codes);
    mr_table_free(t);
    mr_parquet_close(f);
    mr_free(p);
    /* with CRC checks off the corrupt-checksum file reads */
    p = mr_path_join(dir, "datapage_v1-corrupt-checksum.parquet");
    assert_alloc(p);
    CHECK_OK(mr_parquet_open(p, &f, &err));
    mr_parquet_set_verify_checksums(f, 0);
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    assert_int_equal(t->n_rows, 5120);
    mr_table_free(t);
    mr_parquet_close(f);
    mr_free(p);
}

/* ---- DuckDB-written fixtures --------------------------------------------------------- */

static void compare_json(const char *pq, const char *js)
{
    mr_error err;
    mr_error_init(&err);
    json_error_t jerr;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *root = json_load_file(js, 0, &jerr);
    if (!root) mr_test_accept_if_oom(oom0);
    if (!root) fail_msg("%s: %s", js, jerr.text);
    mr_parquet_file *f;
    CHECK_OK(mr_parquet_open(pq, &f, &err));
    mr_table *t;
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &t, &err));
    json_t *cols = json_object_get(root, "columns"), *data = json_object_get(root, "data");
    assert_int_equal(json_array_size(cols), t->n_cols);
    assert_int_equal(json_array_size(data), t->n_rows);
    assert_int_equal(json_integer_value(json_object_get(root, "rows")), (json_int_t)t->n_rows);
    for (size_t j = 0; j < t->n_cols; j++) {
        const mr_column *c = t->cols[j];
        json_t *cj = json_array_get(cols, j);
        assert_string_equal(json_string_value(json_object_get(cj, "name")), c->name);
        const char *kind = json_string_value(json_object_get(cj, "kind"));
        /* the type DuckDB gives the column, as the millrace type and kind that keep it */
        const char *duck = json_string_value(json_object_get(cj, "duckdb"));
        static const char *const duck_names[][2] = {
            {"BOOLEAN", "bool"},     {"TINYINT", "int8"},       {"SMALLINT", "int16"},         {"INTEGER", "int32"},
            {"BIGINT", "int64"},     {"UTINYINT", "uint8"},     {"USMALLINT", "uint16"},       {"UINTEGER", "uint32"},
            {"UBIGINT", "uint64"},   {"FLOAT", "float32"},      {"DOUBLE", "float64"},         {"VARCHAR", "string"},
            {"BLOB", "binary"},      {"DATE", "date"},          {"TIMESTAMP", "timestamp_local"},
            {"TIMESTAMP_NS", "timestamp_local"}, /* kept to microseconds */
            {"TIMESTAMP WITH TIME ZONE", "timestamp"},
        };
        char want_kind[40] = "", got_kind[40];
        for (size_t k = 0; duck && k < sizeof duck_names / sizeof duck_names[0]; k++)
            if (!strcmp(duck, duck_names[k][0])) snprintf(want_kind, sizeof want_kind, "%s", duck_names[k][1]);
        unsigned dp, ds;
        if (duck && sscanf(duck, "DECIMAL(%u,%u)", &dp, &ds) == 2) snprintf(want_kind, sizeof want_kind, "decimal(%u,%u)", dp, ds);
        if (!want_kind[0]) fail_msg("%s column '%s': no millrace kind for DuckDB's %s", pq, c->name, duck ? duck : "?");
        mr_kind_name(c->type, c->kind, got_kind, sizeof got_kind);
        if (strcmp(got_kind, want_kind)) fail_msg("%s column '%s': DuckDB reads %s, millrace %s", pq, c->name, duck, got_kind);
        for (size_t i = 0; i < t->n_rows; i++) {
            json_t *v = json_array_get(json_array_get(data, i), j);
            int null = mr_column_is_null(c, i);
            if (json_is_null(v) != null) fail_msg("%s row %zu column '%s': null mismatch", pq, i, c->name);
            if (null) continue;
            int ok = 1;
            if (!strcmp(kind, "bool")) {
                ok = c->type == MR_T_BOOL && json_is_true(v) == (((uint8_t *)c->data)[i] != 0);
            } else if (!strcmp(kind, "int")) {
                int64_t got = c->type == MR_T_DATE ? ((int32_t *)c->data)[i] : ((int64_t *)c->data)[i];
                ok = json_is_integer(v) && got == (int64_t)json_integer_value(v);
            } else if (!strcmp(kind, "float")) {
                ok = c->type == MR_T_FLOAT64 && ((double *)c->data)[i] == json_number_value(v);
            } else if (!strcmp(kind, "decimal")) { /* DuckDB printed the double nearest the decimal */
                double want = json_number_value(v);
                ok = c->type == MR_T_DECIMAL &&
                     mr_decimal_to_f64(((int64_t *)c->data)[i], c->kind.scale) == want;
            } else if (!strcmp(kind, "float32")) {
                ok = c->type == MR_T_FLOAT32 && ((float *)c->data)[i] == (float)json_number_value(v);
            } else if (!strcmp(kind, "string")) {
                size_t l;
                const char *s = mr_column_str(c, i, &l);
                ok = c->type == MR_T_STRING && json_string_length(v) == l && !memcmp(json_string_value(v), s, l);
            } else {
                fail_msg("unknown kind %s", kind);
            }
            if (!ok) {
                mr_buf b;
                mr_buf_init(&b);
                assert_ok(mr_column_format(c, i, &b));
                char *want = json_dumps(v, JSON_ENCODE_ANY);
                fail_msg("%s row %zu column '%s' (%s): got %s, DuckDB read %s", pq, i, c->name, kind, b.data, want);
            }
        }
    }
    mr_table_free(t);
    mr_parquet_close(f);
    json_decref(root);
}

static int compare_dir(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char *p = mr_path_join(dir, e->d_name);
        assert_alloc(p);
        size_t l = strlen(p);
        if (mr_fs_is_dir(p)) {
            n += compare_dir(p);
        } else if (l > 8 && !strcmp(p + l - 8, ".parquet")) {
            char *js = mr_strndup(p, l - 8);
            assert_alloc(js);
            char *jp = mr_asprintf("%s.json", js);
            assert_alloc(jp);
            compare_json(p, jp);
            mr_free(js);
            mr_free(jp);
            n++;
        }
        mr_free(p);
    }
    closedir(d);
    return n;
}

static void test_duckdb_fixtures(void **state)
{
    (void)state;
    const char *fx = getenv("MILLRACE_TEST_FIXTURES");
    assert_alloc(fx);
    char *dir = mr_path_join(fx, "parquet");
    assert_alloc(dir);
    int n = compare_dir(dir);
    assert_true(n >= 11);
    /* row groups written by DuckDB */
    char *p = mr_path_join(dir, "rowgroups.parquet");
    assert_alloc(p);
    mr_error err;
    mr_error_init(&err);
    mr_parquet_file *f;
    CHECK_OK(mr_parquet_open(p, &f, &err));
    assert_int_equal(mr_parquet_num_row_groups(f), 3);
    mr_parquet_stats s;
    CHECK_OK(mr_parquet_column_stats(f, 0, 0, &s, &err));
    assert_true(s.has_min_max);
    assert_int_equal(s.min_i, 0);
    assert_int_equal(s.max_i, 99);
    mr_parquet_close(f);
    mr_free(p);
    mr_free(dir);
}

/* Write/read throughput on a 1M-row float64 table (informational). */
static void test_throughput(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    size_t n = 1000000;
    mr_table *t;
    CHECK_OK(mr_table_new(&t, &err));
    mr_column *c;
    CHECK_OK(mr_column_new("x", MR_T_FLOAT64, n, &c, &err));
    uint64_t x = 5;
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        assert_ok(mr_column_append_float64(c, (double)(x >> 11) / 9007199254740992.0));
    }
    CHECK_OK(mr_table_add_column(t, c, &err));
    mr_parquet_codec codecs[] = {MR_PQ_UNCOMPRESSED, MR_PQ_SNAPPY, MR_PQ_ZSTD};
    for (int k = 0; k < 3; k++) {
        char *path = tmp_path("tp.parquet");
        mr_parquet_write_opts o;
        mr_parquet_write_opts_init(&o);
        o.codec = codecs[k];
        double t0 = mr_now();
        CHECK_OK(mr_parquet_write_table(path, t, &o, &err));
        double t1 = mr_now();
        mr_parquet_file *f;
        CHECK_OK(mr_parquet_open(path, &f, &err));
        mr_table *r;
        CHECK_OK(mr_parquet_read_all(f, NULL, 0, &r, &err));
        double t2 = mr_now();
        assert_int_equal(r->n_rows, n);
        assert_memory_equal(r->cols[0]->data, c->data, n * 8);
        printf("throughput %s: write %.0f MB/s, read %.0f MB/s (8 MB of float64)\n", mr_parquet_codec_name(codecs[k]),
               8.0 / (t1 - t0), 8.0 / (t2 - t1));
        mr_table_free(r);
        mr_parquet_close(f);
        mr_free(path);
    }
    mr_table_free(t);
}

/* A file appears under its name only once complete: while writing, and
 * after an abandoned writer, there is nothing at the path and no leftover;
 * an existing file at the path is replaced (a new inode), never truncated
 * under a reader that has it open or mapped. */
static size_t count_entries(const char *dir, const char *prefix)
{
    DIR *d = opendir(dir);
    size_t n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (!strncmp(e->d_name, prefix, strlen(prefix))) n++;
    if (d) closedir(d);
    return n;
}

static void test_writer_publishes_on_close(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_table *t = make_table(200, 11, 1);
    char *path = tmp_path("atomic.parquet");
    mr_parquet_writer *w = NULL;
    CHECK_OK(mr_parquet_writer_open(path, NULL, &w, &err));
    CHECK_OK(mr_parquet_writer_write(w, t, &err));
    struct stat st;
    assert_int_not_equal(stat(path, &st), 0); /* not visible while written */
    assert_int_equal(count_entries(tmpdir, "atomic.parquet"), 1); /* its temporary */
    mr_parquet_writer_free(w); /* abandoned */
    assert_int_equal(count_entries(tmpdir, "atomic.parquet"), 0);
    CHECK_OK(mr_parquet_write_table(path, t, NULL, &err));
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(count_entries(tmpdir, "atomic.parquet"), 1);
    /* rewriting replaces the inode: a reader holding the old file keeps it */
    mr_parquet_file *f = NULL;
    CHECK_OK(mr_parquet_open_mapped(path, &f, &err));
    mr_table *small = make_table(5, 3, 0);
    CHECK_OK(mr_parquet_write_table(path, small, NULL, &err));
    mr_table *back = NULL;
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &back, &err));
    assert_int_equal(back->n_rows, 200);
    mr_table_free(back);
    mr_parquet_close(f);
    mr_table_free(small);
    mr_table_free(t);
    unlink(path);
    mr_free(path);
}

/* A footer whose num_rows disagrees with the sum of its row groups is
 * refused, naming the file and both numbers (issue 18): a reader that
 * believed either one would get a wrong row count. The file is written
 * with 120 rows in row groups of 50, 50 and 20; its FileMetaData.num_rows
 * (thrift compact: field header 0x16 = delta 1, i64; then the zigzag varint
 * of 120 = 0xf0 0x01; the first such bytes of the footer, right after the
 * schema list, which holds no i64) is patched to 121. */
static void test_footer_row_count_mismatch(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_table *t = make_table(120, 5, 0);
    char *path = tmp_path("rows.parquet");
    mr_parquet_write_opts o;
    mr_parquet_write_opts_init(&o);
    o.row_group_rows = 50;
    CHECK_OK(mr_parquet_write_table(path, t, &o, &err));
    char *data;
    size_t len;
    CHECK_OK(mr_fs_read_file(path, 1 << 24, &data, &len, &err));
    uint8_t *u = (uint8_t *)data;
    size_t meta_len = mr_le_get32(u + len - 8), meta = len - 8 - meta_len, hit = 0, n_hits = 0;
    for (size_t i = meta; i + 3 <= len - 8; i++) {
        if (u[i] != 0x16 || u[i + 1] != 0xf0 || u[i + 2] != 0x01) continue;
        if (n_hits == 0) hit = i;
        n_hits++;
    }
    assert_true(n_hits >= 1);
    mr_parquet_file *f = NULL;
    CHECK_OK(mr_parquet_open_mem(u, len, "rows.parquet", &f, &err)); /* unpatched: fine */
    assert_int_equal(mr_parquet_num_rows(f), 120);
    mr_parquet_close(f);
    u[hit + 1] = 0xf2; /* zigzag(121) */
    f = NULL;
    assert_status(mr_parquet_open_mem(u, len, "rows.parquet", &f, &err), MR_E_CORRUPT);
    assert_null(f);
    assert_non_null(strstr(err.file, "rows.parquet"));
    if (!strstr(err.msg, "file metadata says 121 rows, its 3 row groups hold 120"))
        fail_msg("unexpected message '%s'", err.msg);
    mr_free(data);
    mr_free(path);
    mr_table_free(t);
}

/* ---- ranged reads ----------------------------------------------------------- */

typedef struct ranged_src {
    const uint8_t *data;
    size_t size;
    size_t calls;
    uint64_t bytes;
    uint64_t first_off, first_len;
    int released;
} ranged_src;

static mr_status ranged_cb(void *ctx, uint64_t off, size_t len, uint8_t *dst, mr_error *err)
{
    ranged_src *r = ctx;
    if (off > r->size || len > r->size - off) return MR_ERR(err, MR_E_IO, "read past the end");
    if (!r->calls) {
        r->first_off = off;
        r->first_len = len;
    }
    __atomic_fetch_add(&r->calls, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&r->bytes, (uint64_t)len, __ATOMIC_RELAXED);
    memcpy(dst, r->data + off, len);
    return MR_OK;
}

static void ranged_release(void *ctx) { ((ranged_src *)ctx)->released++; }

/* A file read by ranges gives what the file gives; the footer costs one read
 * of the last 64 KiB; a row group read fetches its needed chunks as the
 * coalesced ranges the plan gives, and only those bytes. */
static void test_ranged_reads(void **state)
{
    (void)state;
    mr_error err;
    mr_error_init(&err);
    mr_table *t = make_table(30000, 7, 1);
    char *path = tmp_path("ranged.parquet");
    mr_parquet_write_opts o;
    mr_parquet_write_opts_init(&o);
    o.row_group_rows = 10000;
    CHECK_OK(mr_parquet_write_table(path, t, &o, &err));
    char *bytes = NULL;
    size_t n = 0;
    CHECK_OK(mr_fs_read_file(path, (size_t)1 << 30, &bytes, &n, &err));
    assert_true(n > 65536); /* the footer read is a part of the file */

    mr_parquet_file *local, *f;
    CHECK_OK(mr_parquet_open(path, &local, &err));
    ranged_src r = {(const uint8_t *)bytes, n, 0, 0, 0, 0, 0};
    CHECK_OK(mr_parquet_open_ranged("mem://ranged.parquet", n, ranged_cb, &r, ranged_release, &f, &err));
    assert_int_equal(r.calls, 1);
    assert_int_equal(r.first_off, n - 65536);
    assert_int_equal(r.first_len, 65536);
    assert_int_equal(mr_parquet_num_row_groups(f), 3);
    assert_int_equal(mr_parquet_bytes_read(f), 65536);

    /* everything equal */
    mr_table *a = NULL, *b = NULL;
    CHECK_OK(mr_parquet_read_all(local, NULL, 0, &a, &err));
    CHECK_OK(mr_parquet_read_all(f, NULL, 0, &b, &err));
    assert_tables_equal(a, b);
    mr_table_free(a);
    mr_table_free(b);

    /* one row group, two columns that are not neighbours: two ranges, the chunks' bytes only */
    size_t cols[] = {4, 1};
    mr_parquet_range pr[8];
    size_t np = mr_parquet_plan_ranges(f, 1, cols, 2, pr, 8);
    uint64_t want = (uint64_t)mr_parquet_chunk_bytes(f, 1, 1) + (uint64_t)mr_parquet_chunk_bytes(f, 1, 4);
    uint64_t planned = 0;
    for (size_t k = 0; k < np; k++) {
        planned += pr[k].len;
        if (k) assert_true(pr[k].off > pr[k - 1].off + pr[k - 1].len + MR_PARQUET_COALESCE_GAP - 1);
    }
    int near = mr_parquet_chunk_bytes(f, 1, 2) + mr_parquet_chunk_bytes(f, 1, 3) < MR_PARQUET_COALESCE_GAP;
    if (!near) {
        assert_int_equal(np, 2);
        assert_int_equal(planned, want);
    }
    size_t calls0 = r.calls;
    uint64_t bytes0 = r.bytes;
    mr_table *sub = NULL, *lsub = NULL;
    CHECK_OK(mr_parquet_read_row_group(f, 1, cols, 2, &sub, &err));
    CHECK_OK(mr_parquet_read_row_group(local, 1, cols, 2, &lsub, &err));
    assert_tables_equal(lsub, sub);
    assert_int_equal(r.calls - calls0, np);       /* one request per coalesced range */
    assert_int_equal(r.bytes - bytes0, planned);  /* and nothing else */
    mr_table_free(sub);
    mr_table_free(lsub);

    /* all the columns of a row group: contiguous chunks, one range */
    assert_int_equal(mr_parquet_plan_ranges(f, 0, NULL, 0, pr, 8), 1);

    /* a failing source is the read's error, naming the file */
    r.size = n / 2;
    mr_error_clear(&err);
    assert_status(mr_parquet_read_row_group(f, 2, NULL, 0, &sub, &err), MR_E_IO);
    assert_string_equal(err.file, "mem://ranged.parquet");
    r.size = n;
    mr_parquet_close(f);
    assert_int_equal(r.released, 1);
    /* a footer too long for the first read takes a second one; a bad magic is refused */
    uint8_t *bad = mr_malloc(n);
    assert_non_null(bad);
    memcpy(bad, bytes, n);
    memcpy(bad + n - 4, "PARX", 4);
    ranged_src rb = {bad, n, 0, 0, 0, 0, 0};
    mr_error_clear(&err);
    assert_status(mr_parquet_open_ranged("mem://bad", n, ranged_cb, &rb, ranged_release, &f, &err), MR_E_CORRUPT);
    assert_null(f);
    assert_int_equal(rb.released, 1);
    mr_free(bad);
    mr_parquet_close(local);
    mr_free(bytes);
    mr_free(path);
    mr_table_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_thrift_roundtrip),
        cmocka_unit_test(test_writer_publishes_on_close),
        cmocka_unit_test(test_thrift_skip_and_limits),
        cmocka_unit_test(test_rle_hybrid),
        cmocka_unit_test(test_roundtrip_codecs),
        cmocka_unit_test(test_ranged_reads),
        cmocka_unit_test(test_stats),
        cmocka_unit_test(test_empty_and_errors),
        cmocka_unit_test(test_corrupt_inputs),
        cmocka_unit_test(test_footer_row_count_mismatch),
        cmocka_unit_test(test_lz4_pages),
        cmocka_unit_test(test_kinds_roundtrip),
        cmocka_unit_test(test_decimal_text),
        cmocka_unit_test(test_parquet_testing),
        cmocka_unit_test(test_duckdb_fixtures),
        cmocka_unit_test(test_throughput),
    };
    return mr_test_run(tests, setup_tmp, teardown_tmp);
}
