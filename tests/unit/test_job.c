/* Unit tests for the job boundary (src/pipeline/job.c): job and result
 * files round-trip every field, every value's type and its origin (line and
 * column in millrace.yaml); malformed, truncated and foreign files are
 * refused with the field named; a decoded error keeps its whole context. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "millrace/job.h"
#include "millrace/spec.h"

static mr_value *parse(const char *text)
{
    mr_error err;
    mr_error_init(&err);
    mr_value *v = NULL;
    if (mr_yaml_parse(text, strlen(text), "millrace.yaml", &v, &err) != MR_OK) fail_msg("parse: %s", err.msg);
    return v;
}

/* Same tree, same types, same positions everywhere (keys too). */
static void assert_same_tree(const mr_value *a, const mr_value *b)
{
    assert_int_equal(a->kind, b->kind);
    assert_int_equal(a->line, b->line);
    assert_int_equal(a->col, b->col);
    if (a->kind == MR_V_FLOAT && isnan(a->u.f)) assert_true(isnan(b->u.f));
    else if (a->kind == MR_V_FLOAT) assert_true(a->u.f == b->u.f);
    if (a->kind == MR_V_INT) assert_true(a->u.i == b->u.i);
    if (a->kind == MR_V_BOOL) assert_int_equal(a->u.b, b->u.b);
    if (a->str || b->str) {
        assert_alloc(a->str);
        assert_alloc(b->str);
        assert_string_equal(a->str, b->str);
    }
    assert_int_equal(a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        if (a->kind == MR_V_MAP) {
            assert_string_equal(a->keys[i], b->keys[i]);
            assert_int_equal(a->key_lines[i], b->key_lines[i]);
            assert_int_equal(a->key_cols[i], b->key_cols[i]);
        }
        assert_same_tree(a->items[i], b->items[i]);
    }
}

static const char DEF[] = "op: train\n"
                          "train: out/features/train\n"
                          "label: churned\n"
                          "params:\n"
                          "  objective: binary\n"
                          "  num_leaves: 63\n"
                          "  learning_rate: 0.10\n"
                          "  seven: 7.0\n"
                          "  quoted: \"7\"\n"
                          "  big: 9007199254740993\n"
                          "  neg_inf: -.inf\n"
                          "  not_a_number: .nan\n"
                          "  flag: true\n"
                          "  nothing: null\n"
                          "features: [a, b, c]\n"
                          "nested: {x: [1, {y: 2.5}], \"unicode é\": \"日本\"}\n";

static void fill_job(mr_job *job, mr_value *def, mr_value *params)
{
    static mr_job_io ins[2] = {{"stages.features.train", "out/features/train", "0123456789abcdef0123456789abcdef.dir", 0},
                               {"data/raw.csv", "data/raw.csv", "fedcba9876543210fedcba9876543210", 0}};
    static mr_job_io outs[2] = {{"out", "out/model", "", 0}, {"metrics.json", "metrics.json", "", 1}};
    mr_job_init(job);
    job->stage = "model";
    job->op = "train";
    job->op_version = 3;
    job->key = "00112233445566778899aabbccddeeff";
    job->key_doc = "{\"op\":\"train\"}";
    job->run_id = 42;
    job->smoke = 1;
    job->force = 0;
    job->threads = 2;
    job->mem_bytes = (uint64_t)3 << 30;
    job->workspace = "/work/ws";
    job->spec_path = "/work/ws/millrace.yaml";
    job->result_path = "/work/ws/.millrace/logs/run-42/model.result.json";
    job->def = def;
    job->params = params;
    job->inputs = ins;
    job->n_inputs = 2;
    job->outputs = outs;
    job->n_outputs = 2;
}

static void test_job_round_trip(void **state)
{
    (void)state;
    mr_value *def = parse(DEF);
    mr_value *params = parse("train:\n  learning_rate: 0.05\n  rounds: 300\n");
    mr_job job, back;
    fill_job(&job, def, params);
    mr_buf b;
    mr_buf_init(&b);
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_job_encode(&job, &b, &err));
    assert_ok(mr_job_decode(b.data, b.len, "j.json", &back, &err));
    assert_string_equal(back.stage, "model");
    assert_string_equal(back.op, "train");
    assert_int_equal(back.op_version, 3);
    assert_string_equal(back.key, job.key);
    assert_string_equal(back.key_doc, job.key_doc);
    assert_int_equal(back.run_id, 42);
    assert_int_equal(back.smoke, 1);
    assert_int_equal(back.force, 0);
    assert_int_equal(back.threads, 2);
    assert_true(back.mem_bytes == job.mem_bytes);
    assert_string_equal(back.workspace, job.workspace);
    assert_string_equal(back.spec_path, job.spec_path);
    assert_string_equal(back.result_path, job.result_path);
    assert_int_equal(back.n_inputs, 2);
    assert_string_equal(back.inputs[1].name, "data/raw.csv");
    assert_string_equal(back.inputs[0].id, job.inputs[0].id);
    assert_int_equal(back.n_outputs, 2);
    assert_int_equal(back.outputs[0].metrics, 0);
    assert_int_equal(back.outputs[1].metrics, 1);
    assert_string_equal(back.outputs[1].path, "metrics.json");
    assert_null(back.cache_dir); /* a local job: the run store */
    /* a cluster job's stage cache as entry files */
    {
        mr_job cj;
        mr_buf cb;
        mr_buf_init(&cb);
        job.cache_dir = "/w/.millrace/stage-cache";
        assert_ok(mr_job_encode(&job, &cb, &err));
        job.cache_dir = NULL;
        assert_ok(mr_job_decode(cb.data, cb.len, "j.json", &cj, &err));
        assert_string_equal(cj.cache_dir, "/w/.millrace/stage-cache");
        mr_job_deinit(&cj);
        mr_buf_free(&cb);
    }
    /* every value with its type, text and origin */
    assert_same_tree(def, back.def);
    assert_same_tree(params, back.params);
    assert_true(mr_value_equal(def, back.def));
    const mr_value *seven = mr_value_get_path(back.def, "params.seven");
    assert_int_equal(seven->kind, MR_V_FLOAT); /* 7.0 stays a float */
    assert_int_equal(mr_value_get_path(back.def, "params.quoted")->kind, MR_V_STR); /* "7" stays a string */
    assert_true(mr_value_get_path(back.def, "params.big")->u.i == 9007199254740993LL); /* beyond 2^53 exact */
    assert_string_equal(mr_value_get_path(back.def, "params.learning_rate")->str, "0.10"); /* as written */
    assert_int_equal(mr_value_get_path(back.def, "params.learning_rate")->line, 7);
    assert_int_equal(mr_value_get_path(back.def, "params.learning_rate")->col, 18);
    assert_true(isinf(mr_value_get_path(back.def, "params.neg_inf")->u.f));
    assert_true(mr_value_get_path(back.def, "params.neg_inf")->u.f < 0);
    assert_true(isnan(mr_value_get_path(back.def, "params.not_a_number")->u.f));
    /* writing and reading a file gives the same */
    char path[4096];
    snprintf(path, sizeof path, "%s/millrace-test-job.XXXXXX", mr_test_tmpdir());
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    mr_job fromfile;
    assert_ok(mr_job_write(&job, path, &err));
    assert_ok(mr_job_read(path, &fromfile, &err));
    assert_same_tree(def, fromfile.def);
    unlink(path);
    mr_job_deinit(&fromfile);
    mr_job_deinit(&back);
    mr_buf_free(&b);
    mr_value_free(def);
    mr_value_free(params);
}

static void expect_refused(const char *text, mr_status code, const char *needle)
{
    mr_job job;
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_job_decode(text, strlen(text), "bad.json", &job, &err);
    if (st != code) fail_msg("'%s': expected %s, got %s: %s", text, mr_status_name(code), mr_status_name(st), err.msg);
    char buf[1024];
    mr_error_format(&err, buf, sizeof(buf));
    if (!strstr(buf, needle)) fail_msg("'%s': message '%s' does not mention '%s'", text, buf, needle);
    mr_job_deinit(&job); /* safe on a half-decoded job */
}

static void test_job_refuses_bad_files(void **state)
{
    (void)state;
    expect_refused("{", MR_E_PARSE, "bad.json:1");
    expect_refused("[]", MR_E_PARSE, "not a millrace-job file");
    expect_refused("{\"format\": \"millrace-job-result\", \"version\": 2}", MR_E_PARSE, "not a millrace-job file");
    expect_refused("{\"format\": \"millrace-job\", \"version\": 1}", MR_E_STATE, "version 1");
    expect_refused("{\"format\": \"millrace-job\", \"version\": 2}", MR_E_PARSE, "'stage'");
    /* a whole job with one field broken at a time */
    mr_value *def = parse(DEF), *params = parse("{}");
    mr_job job;
    fill_job(&job, def, params);
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_job_encode(&job, &b, NULL));
    static const struct {
        const char *from, *to, *needle;
    } breaks[] = {
        {"\"threads\": 2", "\"threads\": \"2\"", "'threads'"},
        {"\"threads\": 2", "\"threads\": 0", "'threads'"},
        {"\"smoke\": true", "\"smoke\": 1", "'smoke'"},
        {"\"key\": \"0011", "\"kex\": \"0011", "'key'"},
        {"\"op_version\": 3", "\"op_version\": -1", "'op_version'"},
    };
    for (size_t k = 0; k < sizeof(breaks) / sizeof(breaks[0]); k++) {
        char *s = strstr(b.data, breaks[k].from);
        assert_alloc(s);
        mr_buf x;
        mr_buf_init(&x);
        assert_ok(mr_buf_append(&x, b.data, (size_t)(s - b.data)));
        assert_ok(mr_buf_puts(&x, breaks[k].to));
        assert_ok(mr_buf_puts(&x, s + strlen(breaks[k].from)));
        expect_refused(x.data, MR_E_PARSE, breaks[k].needle);
        mr_buf_free(&x);
    }
    /* a value node that is not [line, col, payload] */
    char *d = strstr(b.data, "\"def\": [");
    assert_alloc(d);
    mr_buf x;
    mr_buf_init(&x);
    assert_ok(mr_buf_append(&x, b.data, (size_t)(d - b.data)));
    assert_ok(mr_buf_puts(&x, "\"def\": [1, \"x\", {}], \"unused\": ["));
    assert_ok(mr_buf_puts(&x, d + strlen("\"def\": [")));
    expect_refused(x.data, MR_E_PARSE, "value node");
    mr_buf_free(&x);
    /* every truncation is refused, none crashes */
    for (size_t n = 0; n < b.len; n += 7) {
        mr_job j2;
        mr_error err;
        mr_error_init(&err);
        assert_int_not_equal(mr_job_decode(b.data, n, "t.json", &j2, &err), MR_OK);
        mr_job_deinit(&j2);
    }
    mr_buf_free(&b);
    mr_value_free(def);
    mr_value_free(params);
}

static void test_result_round_trip(void **state)
{
    (void)state;
    mr_job_result r, back;
    mr_job_result_init(&r);
    r.status = MR_JOB_FAILED;
    MR_ERR(&r.error, MR_E_SCHEMA, "unknown gbdt parameter 'num_leafs'");
    mr_error_at(&r.error, "/w/millrace.yaml", 12, 7);
    mr_error_key(&r.error, "params.num_leafs");
    mr_error_stage(&r.error, "model");
    mr_error_hint(&r.error, "did you mean 'num_leaves'?");
    r.error.row = 17;
    assert_ok(mr_job_result_add_output(&r, "out", "0123456789abcdef0123456789abcdef.dir"));
    assert_ok(mr_job_result_add_metric(&r, "valid.auc", 3, 0.875));
    assert_status(mr_job_result_add_metric(&r, "bad", 0, NAN), MR_E_INVALID_ARG);
    assert_ok(mr_job_result_add_warning(&r, "column 'age' read as string"));
    assert_ok(mr_job_result_add_warning(&r, "invalid \xff\xfe UTF-8 from data"));
    r.bytes_read = 1234567890123LL;
    r.bytes_written = 5;
    mr_buf b;
    mr_buf_init(&b);
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_job_result_encode(&r, &b, &err));
    assert_ok(mr_job_result_decode(b.data, b.len, "r.json", &back, &err));
    assert_int_equal(back.status, MR_JOB_FAILED);
    assert_status(back.error.code, MR_E_SCHEMA);
    assert_string_equal(back.error.msg, r.error.msg);
    assert_string_equal(back.error.file, "/w/millrace.yaml");
    assert_int_equal(back.error.line, 12);
    assert_int_equal(back.error.col, 7);
    assert_int_equal(back.error.row, 17);
    assert_string_equal(back.error.key, "params.num_leafs");
    assert_string_equal(back.error.stage, "model");
    assert_string_equal(back.error.hint, "did you mean 'num_leaves'?");
    assert_int_equal(back.n_outputs, 1);
    assert_string_equal(mr_job_result_output(&back, "out"), "0123456789abcdef0123456789abcdef.dir");
    assert_null(mr_job_result_output(&back, "nope"));
    assert_int_equal(back.n_metrics, 1);
    assert_string_equal(back.metrics[0].name, "valid.auc");
    assert_int_equal(back.metrics[0].step, 3);
    assert_true(back.metrics[0].value == 0.875);
    assert_int_equal(back.n_warnings, 2);
    assert_string_equal(back.warnings[0], "column 'age' read as string");
    assert_string_equal(back.warnings[1], "invalid \xef\xbf\xbd\xef\xbf\xbd UTF-8 from data"); /* replaced, still valid JSON */
    assert_true(back.bytes_read == 1234567890123LL);
    mr_job_result_deinit(&back);
    /* executed: no error field */
    mr_job_result_deinit(&r);
    r.status = MR_JOB_EXECUTED;
    mr_buf_free(&b);
    mr_buf_init(&b);
    assert_ok(mr_job_result_encode(&r, &b, &err));
    assert_ok(mr_job_result_decode(b.data, b.len, "r.json", &back, &err));
    assert_int_equal(back.status, MR_JOB_EXECUTED);
    assert_ok(back.error.code);
    mr_job_result_deinit(&back);
    /* refused */
    const char *bad[] = {"", "{\"format\": \"millrace-job-result\", \"version\": 2, \"status\": \"done\"}",
                         "{\"format\": \"millrace-job-result\", \"version\": 2, \"status\": \"failed\", \"error\": null}",
                         "{\"format\": \"millrace-job\", \"version\": 2}"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        mr_error_init(&err);
        assert_int_not_equal(mr_job_result_decode(bad[k], strlen(bad[k]), "r.json", &back, &err), MR_OK);
        mr_job_result_deinit(&back);
    }
    /* a failed result whose error message is empty (found by fuzz_job):
     * the runner would print a failure that says nothing */
    {
        mr_job_result_init(&r);
        r.status = MR_JOB_FAILED;
        MR_ERR(&r.error, MR_E_IO, "%s", "");
        mr_buf_free(&b);
        mr_buf_init(&b);
        assert_ok(mr_job_result_encode(&r, &b, &err));
        assert_non_null(strstr(b.data, "\"message\": \"\""));
        mr_error_init(&err);
        assert_status(mr_job_result_decode(b.data, b.len, "r.json", &back, &err), MR_E_PARSE);
        assert_non_null(strstr(err.msg, "r.json"));
        assert_non_null(strstr(err.msg, "empty 'message'"));
        mr_job_result_deinit(&back);
        mr_job_result_deinit(&r);
    }
    mr_buf_free(&b);
}

/* A cluster job's result: the cache entries and tune trials it reports
 * for the runner to record; a job's cache_dir. */
static void test_cluster_fields(void **state)
{
    (void)state;
    mr_job_result r, back;
    mr_job_result_init(&r);
    r.status = MR_JOB_EXECUTED;
    assert_ok(mr_job_result_add_cache_entry(&r, "0123456789abcdef0123456789abcdef"));
    assert_ok(mr_job_result_add_cache_entry(&r, "0123456789abcdef0123456789abcdef")); /* once */
    assert_ok(mr_job_result_add_cache_entry(&r, "fedcba9876543210fedcba9876543210"));
    assert_ok(mr_job_result_add_trial(&r, 3, "00112233445566778899aabbccddeeff", "complete", 0.8125, "{\"trial\": 3}"));
    assert_ok(mr_job_result_add_trial(&r, 4, "ffeeddccbbaa99887766554433221100", "failed", NAN, "{}"));
    r.max_rss_kb = 123456;
    mr_buf b;
    mr_buf_init(&b);
    mr_error err;
    mr_error_init(&err);
    assert_ok(mr_job_result_encode(&r, &b, &err));
    assert_ok(mr_job_result_decode(b.data, b.len, "r.json", &back, &err));
    assert_int_equal(back.n_cache_entries, 2);
    assert_string_equal(back.cache_entries[1], "fedcba9876543210fedcba9876543210");
    assert_int_equal(back.n_trials, 2);
    assert_int_equal(back.trials[0].trial, 3);
    assert_string_equal(back.trials[0].status, "complete");
    assert_true(back.trials[0].value == 0.8125);
    assert_string_equal(back.trials[0].record_json, "{\"trial\": 3}");
    assert_true(isnan(back.trials[1].value)); /* written as null */
    assert_true(back.max_rss_kb == 123456);
    mr_job_result_deinit(&back);
    mr_job_result_deinit(&r);
    /* a cache entry that is no key, a trial without its fields: refused, naming the file */
    const char *bad[] = {
        "{\"format\": \"millrace-job-result\", \"version\": 2, \"status\": \"executed\", \"error\": null, \"outputs\": {},"
        " \"metrics\": [], \"warnings\": [], \"cache_entries\": [\"../../etc/passwd\"]}",
        "{\"format\": \"millrace-job-result\", \"version\": 2, \"status\": \"executed\", \"error\": null, \"outputs\": {},"
        " \"metrics\": [], \"warnings\": [], \"trials\": [{\"trial\": 1}]}",
        "{\"format\": \"millrace-job-result\", \"version\": 2, \"status\": \"executed\", \"error\": null, \"outputs\": {},"
        " \"metrics\": [], \"warnings\": [], \"trials\": {}}"};
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        mr_error_init(&err);
        assert_status(mr_job_result_decode(bad[k], strlen(bad[k]), "r.json", &back, &err), MR_E_PARSE);
        assert_non_null(strstr(err.msg, "r.json"));
        mr_job_result_deinit(&back);
    }
    mr_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_round_trip),
        cmocka_unit_test(test_job_refuses_bad_files),
        cmocka_unit_test(test_result_round_trip),
        cmocka_unit_test(test_cluster_fields),
    };
    return mr_test_run(tests, NULL, NULL);
}
