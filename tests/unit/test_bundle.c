/* Unit tests for src/ml/bundle.c and the compiled predictor's serialised
 * form: round trip (byte-identical re-write), bundle predictions bit-equal
 * to mr_model_predict_table after mr_features_apply (gbdt with a features
 * transform, linear without one), every section corrupted or truncated is
 * refused naming the section, older/newer format versions are refused
 * clearly, a hostile compiled section with consistent checksums is refused,
 * optional inputs may be absent, and the one set of rules fitting values to
 * the input schema (every input type, typed and text values, messages naming
 * row, column and expected type, fail and report modes). Data come from a fixed seed (SEED). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/bundle.h"
#include "millrace/profile.h"
#include "millrace/features.h"
#include "millrace/gbdt.h"
#include "millrace/model.h"
#include "millrace/spec.h"

#define SEED 777u

static uint64_t rs;
static double urand(void)
{
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rs >> 11) / 9007199254740992.0;
}

/* x1 (float, 5% null), x2 (float), plan (string), n (int64), id (int64), y (0/1). */
static mr_table *make_table(size_t n, uint64_t seed, int with_label)
{
    rs = seed;
    mr_table *t = NULL;
    mr_column *x1, *x2, *plan, *cnt, *id, *y = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("id", MR_T_INT64, n, &id, NULL));
    assert_ok(mr_column_new("x1", MR_T_FLOAT64, n, &x1, NULL));
    assert_ok(mr_column_new("x2", MR_T_FLOAT64, n, &x2, NULL));
    assert_ok(mr_column_new("plan", MR_T_STRING, n, &plan, NULL));
    assert_ok(mr_column_new("n", MR_T_INT64, n, &cnt, NULL));
    if (with_label) assert_ok(mr_column_new("y", MR_T_FLOAT64, n, &y, NULL));
    static const char *plans[] = {"basic", "pro", "max", "free"};
    for (size_t i = 0; i < n; i++) {
        double a = urand() * 4 - 2, b = urand() * 4 - 2;
        int p = (int)(urand() * 4);
        int64_t c = (int64_t)(urand() * 20);
        assert_ok(mr_column_append_int64(id, (int64_t)i));
        if (urand() < 0.05) assert_ok(mr_column_append_null(x1));
        else assert_ok(mr_column_append_float64(x1, a));
        assert_ok(mr_column_append_float64(x2, b));
        assert_ok(mr_column_append_str(plan, plans[p], strlen(plans[p])));
        assert_ok(mr_column_append_int64(cnt, c));
        double z = 2 * a * b - a + (p == 1) + 0.05 * (double)c;
        if (y) assert_ok(mr_column_append_float64(y, urand() < 1 / (1 + exp(-z)) ? 1.0 : 0.0));
    }
    assert_ok(mr_table_add_column(t, id, NULL));
    assert_ok(mr_table_add_column(t, x1, NULL));
    assert_ok(mr_table_add_column(t, x2, NULL));
    assert_ok(mr_table_add_column(t, plan, NULL));
    assert_ok(mr_table_add_column(t, cnt, NULL));
    if (y) assert_ok(mr_table_add_column(t, y, NULL));
    return t;
}

typedef struct fixture {
    mr_features *fx;
    mr_model *gb;
    mr_model *lin;
    mr_table *test;
    mr_buf bytes; /* gbdt bundle with features */
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof(*f));
    mr_error err;
    mr_error_init(&err);
    mr_table *train = make_table(3000, SEED, 1);
    f->test = make_table(700, SEED + 1, 0);
    static const char yaml[] = "- impute: {columns: [x1], strategy: median, indicator: true}\n"
                               "- onehot: {columns: [plan]}\n"
                               "- drop: {columns: [id]}\n";
    mr_value *v = NULL;
    mr_features_spec *spec = NULL;
    mr_table *xt = NULL;
    if (mr_yaml_parse(yaml, strlen(yaml), "f.yaml", &v, &err) != MR_OK ||
        mr_features_spec_parse(v, "f.yaml", &spec, &err) != MR_OK ||
        mr_features_fit_apply_train(spec, train, "y", &f->fx, &xt, &err) != MR_OK)
        fail_msg("features: %s", err.msg);
    mr_column *ycopy = NULL;
    mr_column_slice(mr_table_column(train, "y"), 0, train->n_rows, &ycopy, NULL);
    assert_ok(mr_table_add_column(xt, ycopy, NULL));
    mr_train_opts o;
    mr_train_opts_init(&o);
    o.label = "y";
    const char *kv = "{objective: binary, num_iterations: 40, num_leaves: 15}";
    mr_value *pm = NULL, *pml = NULL;
    if (mr_yaml_parse(kv, strlen(kv), "p.yaml", &pm, &err) != MR_OK) fail_msg("params: %s", err.msg);
    o.params = pm;
    if (mr_model_train(xt, NULL, &o, &f->gb, &err) != MR_OK) fail_msg("train: %s", err.msg);
    /* linear on raw numeric columns, no features transform */
    mr_train_opts_init(&o);
    o.kind = "linear";
    o.label = "y";
    const char *feats[] = {"x2", "n"};
    if (mr_yaml_parse("{objective: binary}", 19, "p.yaml", &pml, &err) != MR_OK) fail_msg("params: %s", err.msg);
    o.features = feats;
    o.n_features = 2;
    o.params = pml;
    if (mr_model_train(train, NULL, &o, &f->lin, &err) != MR_OK) fail_msg("train linear: %s", err.msg);
    mr_value_free(pm);
    mr_value_free(pml);
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = f->gb;
    bb.features = f->fx;
    bb.metrics_json = "{\"valid\": {\"auc\": 0.81}}";
    bb.name = "t";
    bb.run_id = 3;
    bb.stage = "package";
    bb.git_commit = "0123456789012345678901234567890123456789";
    mr_buf_init(&f->bytes);
    if (mr_bundle_write(&bb, &f->bytes, &err) != MR_OK) fail_msg("write: %s", err.msg);
    mr_table_free(xt);
    mr_table_free(train);
    mr_features_spec_free(spec);
    mr_value_free(v);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    mr_features_free(f->fx);
    mr_model_free(f->gb);
    mr_model_free(f->lin);
    mr_table_free(f->test);
    mr_buf_free(&f->bytes);
    free(f);
    return 0;
}

/* Out of memory at each allocation of loading a valid bundle: MR_OK or
 * MR_E_NOMEM, never MR_E_CORRUPT (jansson's "invalid token" when its
 * parser ran out of memory made the manifest "not a JSON object"). */
static void test_load_oom_is_nomem(void **state)
{
    fixture *f = *state;
    for (long k = 1, fired = 1; fired; k++) {
        mr_error err;
        mr_error_init(&err);
        mr_bundle *b = NULL;
        uint64_t oom0 = mr_alloc_failures_here();
        mr_alloc_fail_after(k);
        mr_status rc = mr_bundle_from_bytes(f->bytes.data, f->bytes.len, &b, &err);
        mr_alloc_fail_after(0);
        fired = mr_alloc_failures_here() != oom0;
        if (rc != MR_OK && !(rc == MR_E_NOMEM && fired))
            fail_msg("allocation %ld failing: %s (%s)", k, mr_status_name(rc), err.msg);
        assert_true(rc == MR_OK || b == NULL);
        mr_bundle_free(b);
    }
}

static void test_round_trip_and_bit_identical(void **state)
{
    fixture *f = *state;
    mr_error err;
    mr_error_init(&err);
    mr_bundle *b = NULL;
    if (mr_bundle_from_bytes(f->bytes.data, f->bytes.len, &b, &err) != MR_OK) fail_msg("load: %s", err.msg);
    assert_int_equal(mr_bundle_n_sections(b), 5);
    assert_int_equal(mr_bundle_n_inputs(b), 4); /* x1, x2, plan, n (id dropped) */
    assert_string_equal(mr_bundle_output_name(b, 0), "prediction");
    assert_non_null(strstr(mr_bundle_manifest_json(b), "\"git_commit\": \"0123456789"));
    /* re-writing the loaded parts gives the same bytes */
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = mr_bundle_model(b);
    bb.features = mr_bundle_features(b);
    bb.metrics_json = mr_bundle_metrics_json(b);
    bb.name = "t";
    bb.run_id = 3;
    bb.stage = "package";
    bb.git_commit = "0123456789012345678901234567890123456789";
    mr_buf again;
    mr_buf_init(&again);
    assert_ok(mr_bundle_write(&bb, &again, &err));
    assert_int_equal(again.len, f->bytes.len);
    assert_memory_equal(again.data, f->bytes.data, again.len);
    mr_buf_free(&again);
    /* predictions: bundle path == features apply + model predict, bit for bit */
    for (int raw = 0; raw < 2; raw++) {
        double *p1 = NULL, *p2 = NULL;
        size_t k1 = 0, k2 = 0;
        mr_table *xt = NULL;
        assert_ok(mr_bundle_predict_table(b, f->test, raw, 0, &p1, &k1, &err));
        assert_ok(mr_features_apply(f->fx, f->test, &xt, &err));
        assert_ok(mr_model_predict_table(f->gb, xt, raw, &p2, &k2, &err));
        assert_int_equal(k1, k2);
        assert_memory_equal(p1, p2, f->test->n_rows * k1 * sizeof(double));
        /* thread count never changes the bytes */
        double *p3 = NULL;
        assert_ok(mr_bundle_predict_table(b, f->test, raw, 1, &p3, &k1, &err));
        assert_memory_equal(p1, p3, f->test->n_rows * k1 * sizeof(double));
        mr_free(p1);
        mr_free(p2);
        mr_free(p3);
        mr_table_free(xt);
    }
    mr_bundle_free(b);
}

/* Section i's offset and length from the table. */
static void sec_at(const mr_buf *bytes, size_t i, uint32_t *id, uint64_t *off, uint64_t *len)
{
    const uint8_t *e = (const uint8_t *)bytes->data + 16 + i * 40;
    memcpy(id, e, 4);
    memcpy(off, e + 8, 8);
    memcpy(len, e + 16, 8);
}

static void expect_refused(const void *data, size_t len, const char *needle, const char *what)
{
    mr_error err;
    mr_error_init(&err);
    mr_bundle *b = NULL;
    mr_status st = mr_bundle_from_bytes(data, len, &b, &err);
    if (st != MR_E_CORRUPT) fail_msg("%s: expected MR_E_CORRUPT, got %d (%s)", what, st, err.msg);
    if (!strstr(err.msg, needle)) fail_msg("%s: message '%s' does not name '%s'", what, err.msg, needle);
    assert_null(b);
}

static void test_each_section_corrupt_or_truncated(void **state)
{
    fixture *f = *state;
    char *copy = malloc(f->bytes.len);
    for (size_t i = 0; i < 5; i++) {
        uint32_t id;
        uint64_t off, len;
        sec_at(&f->bytes, i, &id, &off, &len);
        char needle[64];
        snprintf(needle, sizeof(needle), "section '%s'", mr_bundle_section_name(id));
        /* one flipped bit at the start, middle and end */
        uint64_t where[3] = {off, off + len / 2, off + len - 1};
        for (int w = 0; w < 3; w++) {
            memcpy(copy, f->bytes.data, f->bytes.len);
            copy[where[w]] ^= 0x10;
            expect_refused(copy, f->bytes.len, needle, needle);
        }
        /* truncated inside the section */
        expect_refused(f->bytes.data, (size_t)(off + len / 2), needle, "truncated");
    }
    /* the section table itself */
    memcpy(copy, f->bytes.data, f->bytes.len);
    copy[16 + 40 + 9] ^= 1; /* section 1's offset */
    expect_refused(copy, f->bytes.len, "section table", "table corruption");
    expect_refused(f->bytes.data, 40, "section table", "truncated table");
    expect_refused(f->bytes.data, 8, "header", "truncated header");
    memcpy(copy, f->bytes.data, f->bytes.len);
    copy[0] = 'X';
    expect_refused(copy, f->bytes.len, "bad magic", "magic");
    free(copy);
}

/* Every byte of a bundle is checked (issue 18): the header and table by
 * their checksum, each section by its own, and the zero padding before,
 * between and after the sections must be zero, with the sections at the
 * canonical offsets and nothing after the last one. Each padding byte set
 * to 1, a section moved by 8 bytes, and 8 bytes appended are refused. */
static void test_padding_checked(void **state)
{
    fixture *f = *state;
    size_t n = f->bytes.len;
    uint8_t *covered = calloc(n, 1), *copy = malloc(n + 8);
    uint32_t n_sec;
    memcpy(&n_sec, f->bytes.data + 12, 4);
    memset(covered, 1, 16 + 40 * n_sec + 16);
    for (size_t i = 0; i < n_sec; i++) {
        uint32_t id;
        uint64_t off, len;
        sec_at(&f->bytes, i, &id, &off, &len);
        memset(covered + off, 1, (size_t)len);
    }
    size_t n_pad = 0;
    for (size_t k = 0; k < n; k++) {
        if (covered[k]) continue;
        assert_int_equal(f->bytes.data[k], 0); /* the writer pads with zeros */
        memcpy(copy, f->bytes.data, n);
        copy[k] = 1;
        expect_refused(copy, n, "is not zero", "a padding byte set");
        n_pad++;
    }
    assert_true(n_pad > 0);
    memcpy(copy, f->bytes.data, n);
    memset(copy + n, 0, 8);
    expect_refused(copy, n + 8, "file has", "8 bytes appended");
    /* the last section moved 8 bytes on (table offset and checksum updated):
     * still refused, it is not where the layout puts it */
    memcpy(copy, f->bytes.data, n);
    uint8_t *e = (uint8_t *)copy + 16 + 40 * (n_sec - 1);
    uint64_t off = mr_le_get64(e + 8), len = mr_le_get64(e + 16);
    memmove(copy + off + 8, copy + off, (size_t)len);
    memset(copy + off, 0, 8);
    mr_le_put64(e + 8, off + 8);
    mr_hash128 th = mr_hash_bytes(copy, 16 + 40 * n_sec);
    mr_le_put64((uint8_t *)copy + 16 + 40 * n_sec, th.hi);
    mr_le_put64((uint8_t *)copy + 16 + 40 * n_sec + 8, th.lo);
    expect_refused(copy, (size_t)((off + 8 + len + 7) & ~(uint64_t)7), "expected", "a section moved");
    free(covered);
    free(copy);
}

static void test_versions(void **state)
{
    fixture *f = *state;
    char *copy = malloc(f->bytes.len);
    memcpy(copy, f->bytes.data, f->bytes.len);
    copy[8] = 0; /* an older version 0 */
    expect_refused(copy, f->bytes.len, "unsupported bundle format version 0", "old version");
    copy[8] = 2;
    expect_refused(copy, f->bytes.len, "unsupported bundle format version 2", "newer version");
    free(copy);
}

/* A compiled section rewritten with a forged child index and recomputed
 * checksums must still be refused: checksums catch accidents, the content
 * checks catch the rest. */
static void test_hostile_compiled(void **state)
{
    fixture *f = *state;
    char *copy = malloc(f->bytes.len);
    memcpy(copy, f->bytes.data, f->bytes.len);
    for (size_t i = 0; i < 5; i++) {
        uint32_t id;
        uint64_t off, len;
        sec_at(&f->bytes, i, &id, &off, &len);
        if (id != MR_BSEC_COMPILED) continue;
        uint8_t *s = (uint8_t *)copy + off;
        uint32_t K;
        uint64_t nt;
        memcpy(&K, s + 12, 4);
        memcpy(&nt, s + 24, 8);
        size_t node0 = 64 + (size_t)K * 8 + (size_t)nt * 4; /* first node: thr, meta, child0, child1 */
        int32_t back = 0;                                    /* child pointing at itself: a loop */
        memcpy(s + node0 + 8, &back, 4);
        mr_hash128 h = mr_hash_bytes(s, (size_t)len);
        uint8_t *e = (uint8_t *)copy + 16 + i * 40 + 24;
        memcpy(e, &h.hi, 8);
        memcpy(e + 8, &h.lo, 8);
        uint32_t n;
        memcpy(&n, copy + 12, 4);
        mr_hash128 th = mr_hash_bytes(copy, 16 + (size_t)n * 40);
        memcpy(copy + 16 + n * 40, &th.hi, 8);
        memcpy(copy + 16 + n * 40 + 8, &th.lo, 8);
    }
    expect_refused(copy, f->bytes.len, "section 'compiled'", "forged child");
    free(copy);
}

static void test_linear_without_features(void **state)
{
    fixture *f = *state;
    mr_error err;
    mr_error_init(&err);
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = f->lin;
    mr_buf buf;
    mr_buf_init(&buf);
    assert_ok(mr_bundle_write(&bb, &buf, &err));
    mr_bundle *b = NULL;
    if (mr_bundle_from_bytes(buf.data, buf.len, &b, &err) != MR_OK) fail_msg("load: %s", err.msg);
    assert_int_equal(mr_bundle_n_sections(b), 2); /* manifest, model */
    assert_int_equal(mr_bundle_n_inputs(b), 2);
    double *p1 = NULL, *p2 = NULL;
    size_t k = 0;
    assert_ok(mr_bundle_predict_table(b, f->test, 0, 0, &p1, &k, &err));
    assert_ok(mr_model_predict_table(f->lin, f->test, 0, &p2, &k, &err));
    assert_memory_equal(p1, p2, f->test->n_rows * sizeof(double));
    mr_free(p1);
    mr_free(p2);
    /* a missing required input is named */
    mr_table *t = make_table(10, 5, 0);
    mr_table_project(t, (const char *[]){"x2"}, 1, NULL);
    mr_error_clear(&err);
    assert_status(mr_bundle_predict_table(b, t, 0, 0, &p1, &k, &err), MR_E_NOT_FOUND);
    assert_string_equal(err.key, "n");
    mr_table_free(t);
    mr_bundle_free(b);
    mr_buf_free(&buf);
}

static void test_bad_metrics_and_schema(void **state)
{
    fixture *f = *state;
    mr_error err;
    mr_error_init(&err);
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = f->gb;
    bb.features = f->fx;
    bb.metrics_json = "[1,2]";
    mr_buf buf;
    mr_buf_init(&buf);
    assert_status(mr_bundle_write(&bb, &buf, &err), MR_E_PARSE);
    /* a model whose features the transform does not produce */
    mr_error_clear(&err);
    bb.metrics_json = NULL;
    bb.model = f->lin; /* reads x2 and n; the transform produces x2 and n too */
    assert_ok(mr_bundle_write(&bb, &buf, &err));
    mr_buf_free(&buf);
}

/* A profile section: written from the training table over the inputs,
 * read back; a profile naming a column that is no input is never written,
 * and a loader refuses one whose kinds disagree with the schema. */
static void test_profile_section(void **state)
{
    fixture *f = *state;
    mr_bundle *b = NULL;
    assert_ok(mr_bundle_from_bytes(f->bytes.data, f->bytes.len, &b, NULL));
    assert_null(mr_bundle_profile(b)); /* the fixture has none */
    size_t n_in = mr_bundle_n_inputs(b);
    const char *names[8];
    int cat[8];
    for (size_t i = 0; i < n_in; i++) {
        names[i] = mr_bundle_input_at(b, i)->name;
        cat[i] = mr_bundle_input_at(b, i)->categorical;
    }
    mr_table *train = make_table(500, SEED, 0);
    mr_buf prof, bytes;
    mr_buf_init(&prof);
    mr_buf_init(&bytes);
    assert_ok(mr_profile_build(train, names, cat, n_in, &prof, NULL));
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = f->gb;
    bb.features = f->fx;
    bb.profile_json = prof.data;
    assert_ok(mr_bundle_write(&bb, &bytes, NULL));
    mr_bundle *p = NULL;
    assert_ok(mr_bundle_from_bytes(bytes.data, bytes.len, &p, NULL));
    assert_non_null(mr_bundle_profile(p));
    assert_int_equal(mr_profile_n_columns(mr_bundle_profile(p)), n_in);
    const mr_profile_column *plan = mr_profile_find(mr_bundle_profile(p), "plan");
    assert_non_null(plan);
    assert_true(plan->categorical && plan->n_categories == 4);
    mr_bundle_free(p);
    /* a profile of a column that is no input */
    const char *wrong[] = {"id"};
    const int wcat[] = {0};
    mr_buf w;
    mr_buf_init(&w);
    assert_ok(mr_profile_build(train, wrong, wcat, 1, &w, NULL));
    bb.profile_json = w.data;
    mr_buf out;
    mr_buf_init(&out);
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_bundle_write(&bb, &out, &err);
    if (st == MR_E_NOMEM) assert_status(st, MR_OK);
    assert_int_equal(st, MR_E_SCHEMA);
    assert_non_null(strstr(err.msg, "'id'"));
    mr_buf_free(&out);
    mr_buf_free(&w);
    mr_buf_free(&prof);
    mr_buf_free(&bytes);
    mr_table_free(train);
    mr_bundle_free(b);
}

/* The feature service section: written, loaded back with every field; and
 * each way a section can be wrong refused by the writer (MR_E_SCHEMA, naming
 * what), which shares its checks with the loader. */
static void test_service_section(void **state)
{
    fixture *f = *state;
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = f->gb;
    bb.features = f->fx;
    bb.service_json = "{\"missing\": \"reject\", \"stores\": ["
                      "{\"store\": \"out/users/online.mrfs\", \"keys\": [{\"name\": \"user\", \"type\": \"string\"}, "
                      "{\"name\": \"day\", \"type\": \"date\"}]}, "
                      "{\"store\": \"redis://127.0.0.1:6379/items\", \"keys\": [{\"name\": \"item\", \"type\": \"int64\"}]}], "
                      "\"features\": [{\"name\": \"plan\", \"type\": \"string\", \"view\": \"plans\", \"store\": 0, "
                      "\"default\": \"pro\"}, "
                      "{\"name\": \"x1\", \"type\": \"int64\", \"view\": \"clicks\", \"store\": 1, \"default\": 2}, "
                      "{\"name\": \"x2\", \"type\": \"float32\", \"view\": \"clicks\", \"store\": 0}]}";
    mr_buf bytes;
    mr_buf_init(&bytes);
    assert_ok(mr_bundle_write(&bb, &bytes, NULL));
    mr_bundle *b = NULL;
    assert_ok(mr_bundle_from_bytes(bytes.data, bytes.len, &b, NULL));
    const mr_bundle_service *svc = mr_bundle_service_of(b);
    assert_non_null(svc);
    assert_true(svc->reject_missing);
    assert_int_equal(svc->n_stores, 2);
    assert_string_equal(svc->stores[0].store, "out/users/online.mrfs");
    assert_int_equal(svc->stores[0].n_keys, 2);
    assert_string_equal(svc->stores[0].key_names[1], "day");
    assert_int_equal(svc->stores[0].key_types[1], MR_T_DATE);
    assert_string_equal(svc->stores[1].store, "redis://127.0.0.1:6379/items");
    assert_int_equal(svc->stores[1].n_keys, 1);
    assert_string_equal(svc->stores[1].key_names[0], "item");
    assert_int_equal(svc->stores[1].key_types[0], MR_T_INT64);
    assert_int_equal(svc->n_features, 3);
    assert_int_equal(svc->features[0].store, 0);
    assert_int_equal(svc->features[1].store, 1);
    assert_int_equal(svc->features[0].input, (size_t)mr_bundle_input_index(b, "plan"));
    assert_int_equal(svc->features[0].dflt.kind, MR_CELL_STR);
    assert_int_equal(svc->features[0].dflt.len, 3);
    assert_memory_equal(svc->features[0].dflt.str, "pro", 3);
    assert_int_equal(svc->features[1].dflt.kind, MR_CELL_NUM); /* x1 is numeric: the default is its number */
    assert_true(svc->features[1].dflt.num == 2.0);
    assert_int_equal(svc->features[2].type, MR_T_FLOAT32);
    assert_int_equal(svc->features[2].dflt.kind, MR_CELL_NULL);
    assert_string_equal(svc->features[2].view, "clicks");
    mr_bundle_section_info si;
    mr_bundle_section(b, mr_bundle_n_sections(b) - 1, &si);
    assert_string_equal(si.name, "service");
    mr_bundle_free(b);
    b = NULL;
    assert_ok(mr_bundle_from_bytes(f->bytes.data, f->bytes.len, &b, NULL));
    assert_null(mr_bundle_service_of(b)); /* the fixture has none */
    mr_bundle_free(b);
    static const struct {
        const char *json, *says;
    } bad[] = {
        {"{\"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"string\"}]}], \"features\": [{\"name\": \"nope\", \"type\": \"int64\", \"view\": \"v\", \"store\": 0}]}",
         "feature 'nope' is no input of the bundle"},
        {"{\"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"string\"}]}], \"features\": [{\"name\": \"plan\", \"type\": \"string\", \"view\": \"v\", \"store\": 0, \"default\": 3}]}",
         "feature 'plan': the default must be a string"},
        {"{\"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"string\"}]}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 0, \"default\": \"zero\"}]}",
         "feature 'x1': the default must be a number"},
        {"{\"missing\": \"sometimes\", \"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"string\"}]}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 0}]}",
         "\"missing\" must be \"default\" or \"reject\""},
        {"{\"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"string\"}, {\"name\": \"u\", \"type\": \"int64\"}]}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 0}]}",
         "key 'u' is named twice"},
        {"{\"stores\": [{\"keys\": [{\"name\": \"x1\", \"type\": \"string\"}]}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 0}]}",
         "'x1' is both a key and a feature"},
        {"{\"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"text\"}]}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 0}]}",
         "unknown type \"text\""},
        {"{\"stores\": [{\"keys\": []}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 0}]}",
         "store 0: \"keys\" must be a non-empty list"},
        {"{\"stores\": [], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 0}]}",
         "\"stores\" must be a non-empty list"},
        {"{\"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"string\"}]}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"store\": 0}]}",
         "feature 'x1' has no \"view\""},
        {"{\"stores\": [{\"keys\": [{\"name\": \"u\", \"type\": \"string\"}]}], \"features\": [{\"name\": \"x1\", \"type\": \"float64\", \"view\": \"v\", \"store\": 1}]}",
         "feature 'x1': \"store\" must be the index of one of the 1 stores"},
        {"[1, 2]",
         "not a JSON object"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        bb.service_json = bad[i].json;
        mr_buf out;
        mr_buf_init(&out);
        mr_error err;
        mr_error_init(&err);
        mr_status st = mr_bundle_write(&bb, &out, &err);
        if (st == MR_E_NOMEM) assert_status(st, MR_OK);
        assert_int_equal(st, MR_E_SCHEMA);
        if (!strstr(err.msg, bad[i].says)) fail_msg("case %zu: '%s' does not say '%s'", i, err.msg, bad[i].says);
        mr_buf_free(&out);
    }
    mr_buf_free(&bytes);
}

/* ---- fitting values to the input schema --------------------------------------- */

/* A bundle whose inputs have every column type: x (numeric), plan (string
 * category), zone (int64 category: ordinal), flag (bool category: onehot),
 * opt (numeric, read by no model feature: optional). */
static mr_bundle *typed_bundle(void)
{
    mr_error err;
    mr_error_init(&err);
    size_t n = 400;
    mr_table *t = NULL;
    mr_column *x, *plan, *zone, *flag, *opt, *y;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_column_new("x", MR_T_FLOAT64, n, &x, NULL));
    assert_ok(mr_column_new("plan", MR_T_STRING, n, &plan, NULL));
    assert_ok(mr_column_new("zone", MR_T_INT64, n, &zone, NULL));
    assert_ok(mr_column_new("flag", MR_T_BOOL, n, &flag, NULL));
    assert_ok(mr_column_new("opt", MR_T_FLOAT64, n, &opt, NULL));
    assert_ok(mr_column_new("y", MR_T_FLOAT64, n, &y, NULL));
    rs = SEED + 9;
    static const char *plans[] = {"basic", "pro"};
    for (size_t i = 0; i < n; i++) {
        double a = urand() * 2 - 1;
        int p = urand() < 0.5, fl = urand() < 0.5;
        int64_t z = (int64_t)(urand() * 3) + 10;
        assert_ok(mr_column_append_float64(x, a));
        assert_ok(mr_column_append_str(plan, plans[p], strlen(plans[p])));
        assert_ok(mr_column_append_int64(zone, z));
        assert_ok(mr_column_append_bool(flag, fl));
        assert_ok(mr_column_append_float64(opt, urand()));
        double s = 2 * a + p - fl + 0.5 * (double)(z - 11);
        assert_ok(mr_column_append_float64(y, urand() < 1 / (1 + exp(-s)) ? 1.0 : 0.0));
    }
    assert_ok(mr_table_add_column(t, x, NULL));
    assert_ok(mr_table_add_column(t, plan, NULL));
    assert_ok(mr_table_add_column(t, zone, NULL));
    assert_ok(mr_table_add_column(t, flag, NULL));
    assert_ok(mr_table_add_column(t, opt, NULL));
    assert_ok(mr_table_add_column(t, y, NULL));
    static const char yaml[] = "- onehot: {columns: [plan, flag]}\n- ordinal: {columns: [zone]}\n";
    mr_value *v = NULL;
    mr_features_spec *spec = NULL;
    mr_features *fx = NULL;
    mr_table *xt = NULL;
    if (mr_yaml_parse(yaml, strlen(yaml), "f.yaml", &v, &err) != MR_OK ||
        mr_features_spec_parse(v, "f.yaml", &spec, &err) != MR_OK ||
        mr_features_fit_apply_train(spec, t, "y", &fx, &xt, &err) != MR_OK)
        fail_msg("features: %s", err.msg);
    mr_column *ycopy = NULL;
    mr_column_slice(y, 0, n, &ycopy, NULL);
    assert_ok(mr_table_add_column(xt, ycopy, NULL));
    mr_train_opts o;
    mr_train_opts_init(&o);
    o.label = "y";
    const char *kv = "{objective: binary, num_iterations: 10, num_leaves: 7, min_data_in_leaf: 5}";
    mr_value *pm = NULL;
    if (mr_yaml_parse(kv, strlen(kv), "p.yaml", &pm, &err) != MR_OK) fail_msg("params: %s", err.msg);
    const char *ex[] = {"opt"};
    o.params = pm;
    o.exclude = ex;
    o.n_exclude = 1;
    mr_model *m = NULL;
    if (mr_model_train(xt, NULL, &o, &m, &err) != MR_OK) fail_msg("train: %s", err.msg);
    mr_value_free(pm);
    mr_bundle_build bb;
    mr_bundle_build_init(&bb);
    bb.model = m;
    bb.features = fx;
    mr_buf buf;
    mr_buf_init(&buf);
    mr_bundle *b = NULL;
    if (mr_bundle_write(&bb, &buf, &err) != MR_OK || mr_bundle_from_bytes(buf.data, buf.len, &b, &err) != MR_OK)
        fail_msg("bundle: %s", err.msg);
    mr_buf_free(&buf);
    mr_model_free(m);
    mr_features_free(fx);
    mr_features_spec_free(spec);
    mr_value_free(v);
    mr_table_free(xt);
    mr_table_free(t);
    return b;
}

static mr_cell cell_num(double x) { return (mr_cell){.kind = MR_CELL_NUM, .num = x}; }
static mr_cell cell_int(int64_t i) { return (mr_cell){.kind = MR_CELL_INT, .i = i}; }
static mr_cell cell_bool(int v) { return (mr_cell){.kind = MR_CELL_BOOL, .i = v}; }
static mr_cell cell_str(const char *s) { return (mr_cell){.kind = MR_CELL_STR, .str = s, .len = strlen(s)}; }

/* The message coerce_value gives for v at input name (row 3), or "" when it fits. */
static const char *coerce_msg(const mr_bundle *b, const char *name, const mr_cell *v, int text)
{
    static char msg[256];
    mr_bundle_bad bad;
    ssize_t i = mr_bundle_input_index(b, name);
    assert_true(i >= 0);
    msg[0] = '\0';
    mr_status rc = mr_bundle_coerce_value(b, (size_t)i, v, text, NULL, &bad);
    if (rc == MR_OK) return msg;
    assert_status(rc, MR_E_PARSE);
    assert_int_equal(bad.input, (size_t)i);
    assert_string_equal(bad.column, name);
    bad.row = 3;
    mr_bundle_bad_format(&bad, msg, sizeof(msg));
    return msg;
}

static void test_coerce_value_rules(void **state)
{
    (void)state;
    mr_bundle *b = typed_bundle();
    assert_int_equal(mr_bundle_n_inputs(b), 5);
    const mr_bundle_input *in = mr_bundle_input_at(b, (size_t)mr_bundle_input_index(b, "zone"));
    assert_int_equal(mr_bundle_input_column_type(in), MR_T_INT64);
    in = mr_bundle_input_at(b, (size_t)mr_bundle_input_index(b, "flag"));
    assert_int_equal(mr_bundle_input_column_type(in), MR_T_BOOL);
    in = mr_bundle_input_at(b, (size_t)mr_bundle_input_index(b, "plan"));
    assert_int_equal(mr_bundle_input_column_type(in), MR_T_STRING);
    in = mr_bundle_input_at(b, (size_t)mr_bundle_input_index(b, "opt"));
    assert_int_equal(mr_bundle_input_column_type(in), MR_T_FLOAT64);
    assert_false(in->required);
    mr_cell v;
    /* numeric: numbers, integers, booleans; text only when it is text */
    v = cell_num(1.5), assert_string_equal(coerce_msg(b, "x", &v, 0), "");
    v = cell_int(2), assert_string_equal(coerce_msg(b, "x", &v, 0), "");
    v = cell_bool(1), assert_string_equal(coerce_msg(b, "x", &v, 0), "");
    v = cell_str(" 2.5e1 "), assert_string_equal(coerce_msg(b, "x", &v, 1), "");
    v = cell_str("2.5 e1"), assert_string_equal(coerce_msg(b, "x", &v, 1), "row 3: column 'x': expected a number, got \"2.5 e1\"");
    v = cell_str("2.5"), assert_string_equal(coerce_msg(b, "x", &v, 0), "row 3: column 'x': expected a number, got \"2.5\"");
    v = cell_str("oops"), assert_string_equal(coerce_msg(b, "x", &v, 1), "row 3: column 'x': expected a number, got \"oops\"");
    v = cell_str("1e"), assert_string_equal(coerce_msg(b, "x", &v, 1), "row 3: column 'x': expected a number, got \"1e\"");
    /* string categories: strings only */
    v = cell_str("pro"), assert_string_equal(coerce_msg(b, "plan", &v, 0), "");
    v = cell_int(7), assert_string_equal(coerce_msg(b, "plan", &v, 0), "row 3: column 'plan': expected a string, got 7");
    /* integer categories: integers; text must be a whole integer */
    v = cell_int(11), assert_string_equal(coerce_msg(b, "zone", &v, 0), "");
    v = cell_num(11.0), assert_string_equal(coerce_msg(b, "zone", &v, 0), "row 3: column 'zone': expected an integer category, got 11");
    v = cell_str("12"), assert_string_equal(coerce_msg(b, "zone", &v, 1), "");
    v = cell_str("12.5"), assert_string_equal(coerce_msg(b, "zone", &v, 1), "row 3: column 'zone': expected an integer category, got \"12.5\"");
    v = cell_str("99999999999999999999"), assert_string_equal(coerce_msg(b, "zone", &v, 1), "row 3: column 'zone': expected an integer category, got \"99999999999999999999\"");
    /* bool categories: booleans, text true/false */
    v = cell_bool(0), assert_string_equal(coerce_msg(b, "flag", &v, 0), "");
    v = cell_str("true"), assert_string_equal(coerce_msg(b, "flag", &v, 1), "");
    v = cell_str("1"), assert_string_equal(coerce_msg(b, "flag", &v, 1), "row 3: column 'flag': expected true or false, got \"1\"");
    v = cell_int(1), assert_string_equal(coerce_msg(b, "flag", &v, 0), "row 3: column 'flag': expected true or false, got 1");
    /* a JSON array or object */
    v = (mr_cell){.kind = MR_CELL_OTHER, .str = "an array", .len = 8};
    assert_string_equal(coerce_msg(b, "x", &v, 0), "row 3: column 'x': expected a number, got an array");
    /* null fits everything; absent fits optional inputs only */
    v = (mr_cell){.kind = MR_CELL_NULL};
    assert_string_equal(coerce_msg(b, "zone", &v, 0), "");
    assert_string_equal(coerce_msg(b, "opt", NULL, 0), "");
    assert_string_equal(coerce_msg(b, "x", NULL, 0), "row 3: input column 'x' is missing");
    /* appending: the column gets the converted value */
    mr_column *c = NULL;
    mr_bundle_bad bad;
    assert_ok(mr_column_new("zone", MR_T_INT64, 2, &c, NULL));
    v = cell_str("42");
    assert_ok(mr_bundle_coerce_value(b, (size_t)mr_bundle_input_index(b, "zone"), &v, 1, c, &bad));
    v = cell_str("x");
    assert_status(mr_bundle_coerce_value(b, (size_t)mr_bundle_input_index(b, "zone"), &v, 1, c, &bad), MR_E_PARSE);
    assert_int_equal(c->n, 1);
    assert_int_equal(((const int64_t *)c->data)[0], 42);
    assert_alloc(bad.text);
    assert_int_equal(bad.text_len, 1);
    mr_column_free(c);
    mr_bundle_free(b);
}

static mr_column *text_col(const char *name, const char *const *v, size_t n)
{
    mr_column *c = NULL;
    assert_ok(mr_column_new(name, MR_T_STRING, n, &c, NULL));
    for (size_t i = 0; i < n; i++)
        assert_ok(v[i] ? mr_column_append_str(c, v[i], strlen(v[i])) : mr_column_append_null(c));
    return c;
}

/* A text table of the typed bundle's inputs (opt absent), as a CSV reads. */
static mr_table *text_table(const char *const *x, const char *const *zone, const char *const *flag, size_t n)
{
    static const char *plan[] = {"pro", "basic", "pro", "basic", "pro"};
    mr_table *t = NULL;
    assert_ok(mr_table_new(&t, NULL));
    assert_ok(mr_table_add_column(t, text_col("id", (const char *[]){"a", "b", "c", "d", "e"}, n), NULL));
    assert_ok(mr_table_add_column(t, text_col("x", x, n), NULL));
    assert_ok(mr_table_add_column(t, text_col("plan", plan, n), NULL));
    assert_ok(mr_table_add_column(t, text_col("zone", zone, n), NULL));
    assert_ok(mr_table_add_column(t, text_col("flag", flag, n), NULL));
    return t;
}

typedef struct seen {
    int n;
    char lines[8][160];
} seen;

static void note_bad(void *ctx, const mr_bundle_bad *bad)
{
    seen *s = ctx;
    if (s->n < 8) mr_bundle_bad_format(bad, s->lines[s->n], sizeof(s->lines[0]));
    s->n++;
}

static void test_conform_table(void **state)
{
    (void)state;
    mr_bundle *b = typed_bundle();
    mr_error err;
    mr_error_init(&err);
    const char *x[] = {"0.5", "-0.25", NULL, "1", "0"};
    const char *zone[] = {"10", "11", "12", NULL, "13"};
    const char *flag[] = {"true", "false", "true", "false", NULL};
    mr_table *t = text_table(x, zone, flag, 5);
    mr_bundle_conform_opts o;
    mr_bundle_conform_opts_init(&o);
    /* without text, strings cannot stand for numbers */
    assert_status(mr_bundle_conform_table(b, t, &o, &err), MR_E_SCHEMA);
    assert_string_equal(err.key, "x");
    assert_string_equal(err.msg, "input column 'x' has type string; the bundle expects a number (float64)");
    mr_error_clear(&err);
    o.text = 1;
    o.row_base = 1;
    assert_ok(mr_bundle_conform_table(b, t, &o, &err));
    assert_int_equal(mr_table_column(t, "x")->type, MR_T_FLOAT64);
    assert_int_equal(mr_table_column(t, "plan")->type, MR_T_STRING);
    assert_int_equal(mr_table_column(t, "zone")->type, MR_T_INT64);
    assert_int_equal(mr_table_column(t, "flag")->type, MR_T_BOOL);
    assert_int_equal(mr_table_column(t, "id")->type, MR_T_STRING); /* not an input: untouched */
    const mr_column *opt = mr_table_column(t, "opt");                /* absent optional input: all null */
    assert_alloc(opt);
    assert_true(mr_column_is_null(opt, 0) && mr_column_is_null(opt, 4));
    assert_true(mr_column_is_null(mr_table_column(t, "x"), 2));
    /* the converted table predicts exactly as a typed one does */
    mr_table *typed = NULL;
    assert_ok(mr_table_new(&typed, NULL));
    mr_column *c = NULL;
    assert_ok(mr_column_new("x", MR_T_FLOAT64, 5, &c, NULL));
    mr_column_append_float64(c, 0.5), mr_column_append_float64(c, -0.25), mr_column_append_null(c);
    mr_column_append_float64(c, 1), mr_column_append_float64(c, 0);
    assert_ok(mr_table_add_column(typed, c, NULL));
    mr_column_slice(mr_table_column(t, "plan"), 0, 5, &c, NULL), mr_table_add_column(typed, c, NULL);
    assert_ok(mr_column_new("zone", MR_T_INT64, 5, &c, NULL));
    mr_column_append_int64(c, 10), mr_column_append_int64(c, 11), mr_column_append_int64(c, 12);
    mr_column_append_null(c), mr_column_append_int64(c, 13);
    assert_ok(mr_table_add_column(typed, c, NULL));
    assert_ok(mr_column_new("flag", MR_T_BOOL, 5, &c, NULL));
    mr_column_append_bool(c, 1), mr_column_append_bool(c, 0), mr_column_append_bool(c, 1);
    mr_column_append_bool(c, 0), mr_column_append_null(c);
    assert_ok(mr_table_add_column(typed, c, NULL));
    double *p1 = NULL, *p2 = NULL;
    size_t k = 0;
    assert_ok(mr_bundle_predict_table(b, t, 0, 0, &p1, &k, &err));
    assert_ok(mr_bundle_predict_table(b, typed, 0, 0, &p2, &k, &err));
    assert_memory_equal(p1, p2, 5 * sizeof(double)); /* text "true" is the BOOL true, key "true" */
    mr_free(p1);
    mr_free(p2);
    mr_table_free(typed);
    mr_table_free(t);

    /* bad values: the lowest row fails the call, naming row and column */
    const char *xb[] = {"0.5", "0.1", "0.2", "oops", "0"};
    const char *zb[] = {"10", "11", "x", NULL, "13"};
    t = text_table(xb, zb, flag, 5);
    mr_bundle_conform_opts_init(&o);
    o.text = 1;
    o.row_base = 101;
    assert_status(mr_bundle_conform_table(b, t, &o, &err), MR_E_PARSE);
    assert_string_equal(err.msg, "row 103: column 'zone': expected an integer category, got \"x\"");
    assert_string_equal(err.key, "zone");
    mr_error_clear(&err);
    mr_table_free(t);
    /* ... or each one is reported, read as null and its row marked */
    t = text_table(xb, zb, flag, 5);
    seen sn = {0};
    uint8_t bad_rows[5] = {0};
    o.on_bad = note_bad;
    o.ctx = &sn;
    o.bad_rows = bad_rows;
    assert_ok(mr_bundle_conform_table(b, t, &o, &err));
    assert_int_equal(sn.n, 2);
    assert_string_equal(sn.lines[0], "row 104: column 'x': expected a number, got \"oops\"");
    assert_string_equal(sn.lines[1], "row 103: column 'zone': expected an integer category, got \"x\"");
    assert_memory_equal(bad_rows, ((uint8_t[]){0, 0, 1, 1, 0}), 5);
    assert_true(mr_column_is_null(mr_table_column(t, "x"), 3));
    mr_table_free(t);

    /* a missing required input; a column whose type cannot fit */
    t = text_table(x, zone, flag, 5);
    mr_table_project(t, (const char *[]){"x", "plan", "flag"}, 3, NULL);
    assert_status(mr_bundle_conform_table(b, t, &o, &err), MR_E_NOT_FOUND);
    assert_string_equal(err.msg, "input column 'zone' is missing");
    mr_error_clear(&err);
    mr_table_free(t);
    t = text_table(x, zone, flag, 5);
    mr_table_project(t, (const char *[]){"x", "plan", "flag"}, 3, NULL);
    assert_ok(mr_column_new("zone", MR_T_FLOAT64, 5, &c, NULL));
    for (int i = 0; i < 5; i++) assert_ok(mr_column_append_float64(c, 10.5));
    assert_ok(mr_table_add_column(t, c, NULL));
    assert_status(mr_bundle_conform_table(b, t, &o, &err), MR_E_SCHEMA);
    assert_string_equal(err.msg, "input column 'zone' has type float64; the bundle expects a category (string, int or bool) (int64)");
    assert_string_equal(err.key, "zone");
    mr_error_clear(&err);
    mr_table_free(t);
    mr_bundle_free(b);
}

int main(void)
{
    mr_pool_init(2, NULL);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_oom_is_nomem),
        cmocka_unit_test(test_round_trip_and_bit_identical),
        cmocka_unit_test(test_each_section_corrupt_or_truncated),
        cmocka_unit_test(test_padding_checked),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_hostile_compiled),
        cmocka_unit_test(test_linear_without_features),
        cmocka_unit_test(test_bad_metrics_and_schema),
        cmocka_unit_test(test_profile_section),
        cmocka_unit_test(test_service_section),
        cmocka_unit_test(test_coerce_value_rules),
        cmocka_unit_test(test_conform_table),
    };
    int rc = mr_test_run(tests, setup, teardown);
    mr_pool_shutdown();
    return rc;
}
