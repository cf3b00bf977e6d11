/* Unit tests for the dataset loader (src/data/loader.c): determinism in
 * (seed, epoch), exactly-once per epoch with and without shuffle and with a
 * filter, identical sequences for 1/2/4 threads, exact resume at (epoch,
 * batch), early close, and the input-bound statistics. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "millrace/dataset.h"
#include "millrace/expr.h"
#include "millrace/loader.h"

static char tmpdir[256];
static char *ds_dir, *pds_dir;
static mr_error err;
#define N_ROWS 10000

#define CHECK_OK(expr)                                                                     \
    do {                                                                                   \
        mr_error_clear(&err);                                                              \
        mr_status st_ = (expr);                                                            \
        if (st_ != MR_OK) {                                                                \
            char b_[1200];                                                                 \
            mr_error_format(&err, b_, sizeof b_);                                          \
            fail_msg("%s failed: %s: %s", #expr, mr_status_name(st_), b_);                 \
        }                                                                                  \
    } while (0)

/* id 0..N-1, grp = id % 5 (partition column in pds), v = (id * 7919) % 1000, s string */
static int setup(void **state)
{
    (void)state;
    mr_error_init(&err);
    snprintf(tmpdir, sizeof tmpdir, "%s/mr-ld-XXXXXX", mr_test_tmpdir());
    if (!mkdtemp(tmpdir)) return -1;
    mr_table *t;
    mr_column *id, *grp, *v, *s;
    mr_table_new(&t, &err);
    assert_ok(mr_column_new("id", MR_T_INT64, N_ROWS, &id, &err));
    assert_ok(mr_column_new("grp", MR_T_INT64, N_ROWS, &grp, &err));
    assert_ok(mr_column_new("v", MR_T_FLOAT64, N_ROWS, &v, &err));
    assert_ok(mr_column_new("s", MR_T_STRING, N_ROWS, &s, &err));
    for (int64_t i = 0; i < N_ROWS; i++) {
        assert_ok(mr_column_append_int64(id, i));
        assert_ok(mr_column_append_int64(grp, i % 5));
        if (i % 13 == 0) assert_ok(mr_column_append_null(v));
        else assert_ok(mr_column_append_float64(v, (double)((i * 7919) % 1000)));
        char b[32];
        snprintf(b, sizeof b, "s%lld", (long long)(i % 37));
        assert_ok(mr_column_append_str(s, b, strlen(b)));
    }
    assert_ok(mr_table_add_column(t, id, &err));
    assert_ok(mr_table_add_column(t, grp, &err));
    assert_ok(mr_table_add_column(t, v, &err));
    assert_ok(mr_table_add_column(t, s, &err));
    ds_dir = mr_path_join(tmpdir, "flat");
    assert_alloc(ds_dir);
    pds_dir = mr_path_join(tmpdir, "parts");
    assert_alloc(pds_dir);
    mr_dataset_write_opts o;
    mr_dataset_write_opts_init(&o);
    o.rows_per_shard = 2500;
    o.row_group_rows = 300;
    if (mr_dataset_write_table(ds_dir, t, &o, NULL, &err) != MR_OK) return -1;
    const char *pb[] = {"grp"};
    o.partition_by = pb;
    o.n_partition_by = 1;
    o.rows_per_shard = 1000;
    if (mr_dataset_write_table(pds_dir, t, &o, NULL, &err) != MR_OK) return -1;
    mr_table_free(t);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    mr_fs_rmtree(tmpdir, NULL);
    mr_free(ds_dir);
    mr_free(pds_dir);
    return 0;
}

typedef struct seq {
    int64_t *ids;
    size_t n;
    size_t batches;
    mr_loader_stats st;
} seq;

static seq run(const char *dir, const mr_loader_opts *o)
{
    seq s;
    memset(&s, 0, sizeof s);
    s.ids = mr_calloc(N_ROWS + 1, sizeof(int64_t));
    assert_alloc(s.ids);
    mr_loader *ld;
    CHECK_OK(mr_loader_open(dir, o, &ld, &err));
    for (;;) {
        mr_table *b;
        CHECK_OK(mr_loader_next(ld, &b, &err));
        if (!b) break;
        const mr_column *id = mr_table_column(b, "id");
        assert_alloc(id);
        assert_true(b->n_rows <= (o->batch_size ? o->batch_size : 1024));
        assert_true(s.n + b->n_rows <= N_ROWS);
        for (size_t i = 0; i < b->n_rows; i++) s.ids[s.n++] = ((const int64_t *)id->data)[i];
        s.batches++;
        mr_table_free(b);
    }
    mr_loader_stats_get(ld, &s.st);
    mr_loader_close(ld);
    return s;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* every id with keep(id) exactly once */
static void assert_exactly_once(const seq *s, int (*keep)(int64_t), const char *label)
{
    int64_t *c = mr_malloc((s->n + 1) * sizeof *c);
    assert_alloc(c);
    memcpy(c, s->ids, s->n * sizeof *c);
    qsort(c, s->n, sizeof *c, cmp_i64);
    size_t k = 0;
    for (int64_t i = 0; i < N_ROWS; i++) {
        if (keep && !keep(i)) continue;
        if (k >= s->n || c[k] != i) fail_msg("%s: id %lld missing or duplicated", label, (long long)i);
        k++;
    }
    if (k != s->n) fail_msg("%s: %zu rows, expected %zu", label, s->n, k);
    mr_free(c);
}

static int same(const seq *a, const seq *b)
{
    return a->n == b->n && !memcmp(a->ids, b->ids, a->n * sizeof *a->ids);
}

static int keep_filter(int64_t i)
{
    return i % 13 != 0 && (i * 7919) % 1000 < 250 && i % 5 != 3;
}
#define FILTER "v < 250 AND grp != 3"

static void test_no_shuffle_in_order(void **state)
{
    (void)state;
    mr_loader_opts o;
    mr_loader_opts_init(&o);
    o.batch_size = 256;
    seq s = run(ds_dir, &o);
    assert_int_equal(s.n, N_ROWS);
    for (size_t i = 0; i < s.n; i++) assert_int_equal(s.ids[i], (int64_t)i);
    assert_int_equal(s.batches, (N_ROWS + 255) / 256);
    assert_true(s.st.input_bound_fraction >= 0 && s.st.input_bound_fraction <= 1);
    assert_true(s.st.total_seconds >= s.st.wait_seconds);
    assert_int_equal(s.st.rows, N_ROWS);
    mr_free(s.ids);
    o.drop_last = 1;
    s = run(ds_dir, &o);
    assert_int_equal(s.n, (N_ROWS / 256) * 256);
    mr_free(s.ids);
}

static void test_shuffle_determinism(void **state)
{
    (void)state;
    mr_loader_opts o;
    mr_loader_opts_init(&o);
    o.batch_size = 100;
    o.shuffle = 1;
    o.seed = 7;
    o.epoch = 1;
    o.shuffle_buffer_rows = 1000;
    seq a = run(ds_dir, &o), b = run(ds_dir, &o);
    assert_true(same(&a, &b));
    assert_exactly_once(&a, NULL, "shuffle epoch 1");
    int in_order = 1;
    for (size_t i = 0; i < a.n && in_order; i++) in_order = a.ids[i] == (int64_t)i;
    assert_false(in_order);
    o.epoch = 2;
    seq c = run(ds_dir, &o);
    assert_false(same(&a, &c));
    assert_exactly_once(&c, NULL, "shuffle epoch 2");
    o.epoch = 1;
    o.seed = 8;
    seq d = run(ds_dir, &o);
    assert_false(same(&a, &d));
    /* block shuffle only: rows of a row group stay together, in order */
    o.shuffle_buffer_rows = 1;
    seq e = run(ds_dir, &o);
    assert_exactly_once(&e, NULL, "block shuffle");
    for (size_t i = 1; i < e.n; i++)
        if ((e.ids[i] % 2500) % 300 != 0) assert_int_equal(e.ids[i], e.ids[i - 1] + 1);
    mr_free(a.ids);
    mr_free(b.ids);
    mr_free(c.ids);
    mr_free(d.ids);
    mr_free(e.ids);
}

static void test_threads_identical(void **state)
{
    (void)state;
    const char *dirs[] = {ds_dir, pds_dir};
    for (int di = 0; di < 2; di++)
        for (int f = 0; f < 2; f++) {
            mr_loader_opts o;
            mr_loader_opts_init(&o);
            o.batch_size = 333;
            o.shuffle = 1;
            o.seed = 1234;
            o.epoch = 5;
            o.shuffle_buffer_rows = 2048;
            o.filter = f ? FILTER : NULL;
            o.threads = 1;
            seq ref = run(dirs[di], &o);
            assert_exactly_once(&ref, f ? keep_filter : NULL, "threads=1");
            int ts[] = {2, 4, 3};
            for (int k = 0; k < 3; k++) {
                o.threads = ts[k];
                o.prefetch_batches = (size_t)k + 1;
                seq s = run(dirs[di], &o);
                if (!same(&ref, &s)) fail_msg("dataset %d filter %d: threads=%d differs from threads=1", di, f, ts[k]);
                mr_free(s.ids);
            }
            mr_free(ref.ids);
        }
}

static void test_filter_exactly_once(void **state)
{
    (void)state;
    mr_loader_opts o;
    mr_loader_opts_init(&o);
    o.filter = FILTER;
    o.batch_size = 64;
    const char *cols[] = {"s", "id"};
    o.columns = cols;
    o.n_columns = 2;
    seq s = run(pds_dir, &o);
    assert_exactly_once(&s, keep_filter, "filter, no shuffle");
    mr_free(s.ids);
    o.shuffle = 1;
    s = run(pds_dir, &o);
    assert_exactly_once(&s, keep_filter, "filter, shuffle");
    mr_free(s.ids);
    /* bad filter and column are reported at open */
    mr_loader *ld;
    o.filter = "nope > 1";
    assert_status(mr_loader_open(pds_dir, &o, &ld, &err), MR_E_NOT_FOUND);
    mr_error_clear(&err);
}

static void test_resume(void **state)
{
    (void)state;
    for (int variant = 0; variant < 4; variant++) {
        mr_loader_opts o;
        mr_loader_opts_init(&o);
        o.batch_size = 128;
        o.shuffle = variant != 0;
        o.seed = 99;
        o.epoch = 3;
        o.shuffle_buffer_rows = variant == 3 ? 1 : 1500;
        o.filter = variant == 2 ? FILTER : NULL;
        o.threads = 2;
        const char *dir = variant == 2 ? pds_dir : ds_dir;
        seq full = run(dir, &o);
        uint64_t ks[] = {1, 7, full.batches / 2, full.batches - 1, full.batches, full.batches + 3};
        for (size_t q = 0; q < sizeof ks / sizeof ks[0]; q++) {
            o.start_batch = ks[q];
            seq r = run(dir, &o);
            size_t off = ks[q] * 128 < full.n ? ks[q] * 128 : full.n;
            if (r.n != full.n - off || memcmp(r.ids, full.ids + off, r.n * sizeof *r.ids))
                fail_msg("variant %d: resume at batch %llu does not continue the sequence (%zu rows, expected %zu)",
                         variant, (unsigned long long)ks[q], r.n, full.n - off);
            if (variant == 3 && ks[q] == full.batches - 1)
                assert_true(r.st.blocks_decoded < r.st.blocks / 2); /* skipped blocks are not decoded */
            mr_free(r.ids);
        }
        mr_free(full.ids);
    }
}

/* Ranks: each rank's slice has the same length (and batch count); in rank order the
 * slices are the world-size-1 sequence, then rows from its start as padding; a rank
 * resumes at its own batch k. */
static void test_ranks(void **state)
{
    (void)state;
    /* 0: shuffled, 1: filtered (1848 rows), 2: dataset order, 3: 1001 rows (padded by 1 and 3),
     * 4: 3 rows for 4 ranks (a slice wholly of padding) */
    static const char *const filters[] = {NULL, FILTER, NULL, "id < 1001", "id < 3"};
    for (int variant = 0; variant < 5; variant++) {
        mr_loader_opts o;
        mr_loader_opts_init(&o);
        o.batch_size = 64;
        o.shuffle = variant != 2;
        o.seed = 5;
        o.epoch = 1;
        o.shuffle_buffer_rows = 1500;
        o.threads = 2;
        o.filter = filters[variant];
        const char *dir = variant == 1 ? pds_dir : ds_dir;
        seq whole = run(dir, &o);
        size_t n = whole.n;
        assert_true(n > 0);
        int worlds[] = {1, 2, 4};
        for (int wi = 0; wi < 3; wi++)
            for (int drop = 0; drop < 2; drop++) {
                int w = worlds[wi];
                size_t len = drop ? n / ((size_t)w * 64) * 64 : (n + (size_t)w - 1) / (size_t)w;
                o.world_size = w;
                o.drop_last = drop;
                o.start_batch = 0;
                size_t batches = 0;
                for (int r = 0; r < w; r++) {
                    o.rank = r;
                    seq part = run(dir, &o);
                    if (part.n != len)
                        fail_msg("variant %d, world %d, drop %d: rank %d has %zu rows, expected %zu", variant, w,
                                 drop, r, part.n, len);
                    if (r == 0) batches = part.batches;
                    assert_int_equal(part.batches, batches); /* no rank runs dry before the others */
                    for (size_t i = 0; i < len; i++) {
                        size_t p = (size_t)r * len + i;
                        if (part.ids[i] != whole.ids[p % n])
                            fail_msg("variant %d, world %d, drop %d: rank %d row %zu is id %lld, the sequence has %lld",
                                     variant, w, drop, r, i, (long long)part.ids[i], (long long)whole.ids[p % n]);
                    }
                    if (r == w - 1 && batches > 2) { /* resume on a rank */
                        o.start_batch = 2;
                        seq rest = run(dir, &o);
                        assert_int_equal(rest.n, len - 128);
                        assert_memory_equal(rest.ids, part.ids + 128, rest.n * sizeof *rest.ids);
                        mr_free(rest.ids);
                        o.start_batch = 0;
                    }
                    mr_free(part.ids);
                }
            }
        mr_free(whole.ids);
    }
    mr_loader_opts o;
    mr_loader_opts_init(&o);
    o.world_size = 2;
    o.rank = 2;
    mr_loader *ld = NULL;
    mr_error_clear(&err);
    assert_status(mr_loader_open(ds_dir, &o, &ld, &err), MR_E_INVALID_ARG);
}

static void test_early_close(void **state)
{
    (void)state;
    mr_loader_opts o;
    mr_loader_opts_init(&o);
    o.batch_size = 10;
    o.shuffle = 1;
    o.threads = 4;
    for (int i = 0; i < 5; i++) {
        mr_loader *ld;
        CHECK_OK(mr_loader_open(ds_dir, &o, &ld, &err));
        mr_table *b;
        CHECK_OK(mr_loader_next(ld, &b, &err));
        assert_alloc(b);
        mr_table_free(b);
        mr_loader_close(ld); /* threads still busy: must stop cleanly */
    }
    mr_loader *ld;
    CHECK_OK(mr_loader_open(ds_dir, &o, &ld, &err));
    mr_loader_close(ld); /* never read */
}

/* Loader options from JSON (what the Python package passes) through mr_value_from_json and
 * mr_loader_spec_parse: every field lands; bad options are MR_E_SCHEMA naming the key. */
static mr_status spec_of(const char *json, mr_loader_spec *sp, mr_value **v)
{
    mr_error_clear(&err);
    mr_status rc = mr_value_from_json(json, strlen(json), "loader options", v, &err);
    if (rc == MR_OK) rc = mr_loader_spec_parse(*v, sp, &err);
    return rc;
}

static void test_spec_parse(void **state)
{
    (void)state;
    mr_loader_spec sp;
    mr_value *v = NULL;
    assert_ok(spec_of("{\"dataset\": \"d\", \"batch_size\": 7, \"columns\": [\"a\", \"b\"], \"shuffle\": true, "
                      "\"seed\": 9, \"epoch\": 2, \"rank\": 1, \"world_size\": 3, \"filter\": \"a > 1\", "
                      "\"decode\": {\"column\": \"img\", \"format\": \"png\", \"dct_scale\": false}, "
                      "\"random_resized_crop\": {\"size\": [32, 48], \"scale\": [0.5, 1]}, \"hflip\": 0.5, "
                      "\"output\": \"float32\", \"normalize\": {\"mean\": [1, 2, 3], \"std\": [4, 5, 6]}, "
                      "\"on_error\": \"skip\"}",
                      &sp, &v));
    assert_string_equal(sp.dataset, "d");
    assert_int_equal(sp.opts.batch_size, 7);
    assert_int_equal(sp.opts.n_columns, 2);
    assert_string_equal(sp.opts.columns[1], "b");
    assert_true(sp.opts.shuffle && sp.opts.seed == 9 && sp.opts.epoch == 2);
    assert_true(sp.opts.rank == 1 && sp.opts.world_size == 3);
    assert_string_equal(sp.opts.filter, "a > 1");
    assert_string_equal(sp.opts.decode_column, "img");
    assert_int_equal(sp.opts.image.format, MR_IMG_PNG);
    assert_int_equal(sp.opts.image.dct_scale, 0);
    assert_int_equal(sp.opts.image.geometry, MR_IMG_RANDOM_RESIZED_CROP);
    assert_true(sp.opts.image.out_h == 32 && sp.opts.image.out_w == 48);
    assert_true(sp.opts.image.scale[0] == 0.5 && sp.opts.image.scale[1] == 1.0);
    assert_true(sp.opts.image.hflip == 0.5 && sp.opts.image.to_float == 1);
    assert_true(sp.opts.image.mean[2] == 3.0f && sp.opts.image.std[0] == 4.0f);
    assert_int_equal(sp.opts.decode_skip_errors, 1);
    mr_loader_spec_free(&sp);
    mr_value_free(v);
    static const struct { const char *json, *want; } bad[] = {
        {"{\"batch_sise\": 3}", "unknown loader option 'batch_sise'"},
        {"{\"batch_size\": 0}", "loader option 'batch_size': expected an integer >= 1, got 0"},
        {"{\"shuffle\": 1}", "loader option 'shuffle': expected true or false, got int"},
        {"{\"decode\": \"x\", \"resize\": [1, 2, 3]}", "loader option 'resize': expected a size"},
        {"{\"decode\": \"x\"}", "needs one output size"},
        {"{\"center_crop\": 8}", "need decode"},
        {"{\"decode\": \"x\", \"resize\": 8, \"output\": \"f16\"}", "expected one of uint8 or float32, got \"f16\""},
        {"{\"decode\": \"x\", \"resize\": 8, \"normalize\": {\"mean\": [1, 2, 3], \"std\": [1, 1]}}",
         "goes with output: float32"},
        {"{\"decode\": \"x\", \"resize\": 8, \"hflip\": 2}", "hflip"},
        {"{\"rank\": 3, \"world_size\": 2}", "rank 3 is not below world_size 2"},
        {"{\"shapes\": {\"t\": [[2], \"complex64\"]}}", "unknown dtype \"complex64\""},
        {"[1]", "expected a mapping of loader options"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        v = NULL;
        mr_status rc = spec_of(bad[i].json, &sp, &v);
        mr_value_free(v);
        assert_status(rc, MR_E_SCHEMA);
        char msg[512];
        mr_error_format(&err, msg, sizeof msg);
        if (!strstr(msg, bad[i].want)) {
            print_error("%s: got \"%s\", expected \"%s\"\n", bad[i].json, msg, bad[i].want);
            fail();
        }
    }
    v = NULL;
    assert_status(spec_of("{\"a\": ", &sp, &v), MR_E_PARSE);
    assert_null(v);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_shuffle_in_order), cmocka_unit_test(test_shuffle_determinism),
        cmocka_unit_test(test_threads_identical),   cmocka_unit_test(test_filter_exactly_once),
        cmocka_unit_test(test_resume),              cmocka_unit_test(test_early_close),
        cmocka_unit_test(test_ranks),               cmocka_unit_test(test_spec_parse),
    };
    return mr_test_run(tests, setup, teardown);
}
