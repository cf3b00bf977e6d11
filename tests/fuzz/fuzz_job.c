/* libFuzzer target for the job boundary's decoders (src/pipeline/job.c):
 * every input goes to both mr_job_decode and mr_job_result_decode (the
 * "format" field makes at least one refuse it, so both are exercised by
 * every mutation). Aborts when a property job.h promises breaks:
 *   - a failure without a message, with a status job.h does not list, or
 *     that leaves the struct holding something (it must be deinit-able);
 *   - a decoded job or result that does not encode, or whose encoding
 *     does not decode, or decodes to something that encodes differently
 *     (decode -> encode is a fixed point after one round: types, origins
 *     and source order survive);
 *   - a decoded value tree that mr_value_equal says differs from its
 *     re-decoded copy; a result metric that is not finite; a failed
 *     result whose error has no message.
 * Also built with any compiler for the corpus replay (replay.c), which
 * ctest runs on tests/fuzz/corpus/job. */
#include "millrace/job.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_job: property broken: %s\n", what);
    abort();
}

static int decode_status_ok(mr_status rc)
{
    return rc == MR_E_PARSE || rc == MR_E_STATE || rc == MR_E_INVALID_ARG;
}

static int same_bytes(const mr_buf *a, const mr_buf *b)
{
    return a->len == b->len && (!a->len || !memcmp(a->data, b->data, a->len));
}

static void fuzz_job(const char *text, size_t len)
{
    mr_error err;
    mr_error_init(&err);
    mr_job a, b;
    mr_buf ea, eb;
    mr_buf_init(&ea);
    mr_buf_init(&eb);
    mr_status rc = mr_job_decode(text, len, "fuzz.job.json", &a, &err);
    if (rc != MR_OK) {
        check(decode_status_ok(rc) && err.code == rc && err.msg[0], "job: a failure without a listed status and message");
        mr_job_deinit(&a);
        return;
    }
    check(a.def && a.def->kind == MR_V_MAP && a.params && a.params->kind == MR_V_MAP, "job: def/params not mappings");
    check(a.threads >= 1 && a.op_version >= 0 && a.run_id >= 0, "job: a field outside its range");
    check(mr_job_encode(&a, &ea, &err) == MR_OK, "job: a decoded job does not encode");
    mr_error_init(&err);
    check(mr_job_decode(ea.data, ea.len, "fuzz.job.json", &b, &err) == MR_OK, "job: an encoded job does not decode");
    check(mr_job_encode(&b, &eb, &err) == MR_OK, "job: a re-decoded job does not encode");
    check(same_bytes(&ea, &eb), "job: decode(encode(job)) encodes differently");
    check(mr_value_equal(a.def, b.def) && mr_value_equal(a.params, b.params), "job: value trees differ after a round trip");
    check(a.n_inputs == b.n_inputs && a.n_outputs == b.n_outputs && a.n_locks == b.n_locks, "job: io counts differ");
    check(!strcmp(a.stage, b.stage) && !strcmp(a.key, b.key) && a.mem_bytes == b.mem_bytes, "job: fields differ");
    mr_job_deinit(&a);
    mr_job_deinit(&b);
    mr_buf_free(&ea);
    mr_buf_free(&eb);
}

static void fuzz_result(const char *text, size_t len)
{
    mr_error err;
    mr_error_init(&err);
    mr_job_result a, b;
    mr_buf ea, eb;
    mr_buf_init(&ea);
    mr_buf_init(&eb);
    mr_status rc = mr_job_result_decode(text, len, "fuzz.result.json", &a, &err);
    if (rc != MR_OK) {
        check(decode_status_ok(rc) && err.code == rc && err.msg[0], "result: a failure without a listed status and message");
        mr_job_result_deinit(&a);
        return;
    }
    check(a.status == MR_JOB_EXECUTED || a.status == MR_JOB_CACHED || a.status == MR_JOB_FAILED, "result: bad status");
    if (a.status == MR_JOB_FAILED) check(a.error.code != MR_OK && a.error.msg[0], "result: a failure without an error");
    for (size_t k = 0; k < a.n_metrics; k++) check(isfinite(a.metrics[k].value) && a.metrics[k].name[0], "result: a bad metric");
    check(mr_job_result_encode(&a, &ea, &err) == MR_OK, "result: a decoded result does not encode");
    mr_error_init(&err);
    check(mr_job_result_decode(ea.data, ea.len, "fuzz.result.json", &b, &err) == MR_OK,
          "result: an encoded result does not decode");
    check(mr_job_result_encode(&b, &eb, &err) == MR_OK, "result: a re-decoded result does not encode");
    check(same_bytes(&ea, &eb), "result: decode(encode(result)) encodes differently");
    check(a.status == b.status && a.n_outputs == b.n_outputs && a.n_metrics == b.n_metrics && a.n_warnings == b.n_warnings,
          "result: counts differ after a round trip");
    for (size_t k = 0; k < a.n_outputs; k++)
        check(mr_job_result_output(&b, a.outputs[k].name) && !strcmp(mr_job_result_output(&b, a.outputs[k].name), a.outputs[k].id),
              "result: an output id differs after a round trip");
    mr_job_result_deinit(&a);
    mr_job_result_deinit(&b);
    mr_buf_free(&ea);
    mr_buf_free(&eb);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_job((const char *)data, size);
    fuzz_result((const char *)data, size);
    return 0;
}
