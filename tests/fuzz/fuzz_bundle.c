/* libFuzzer target for the bundle loader (src/ml/bundle.c, and through it
 * the manifest, MRFT features, model and MRGP compiled-predictor parsers).
 * Each input is loaded twice:
 *   1. as it is (mr_bundle_from_bytes, what mr_bundle_load does after
 *      reading the file): header, table checksum, canonical layout,
 *      padding, section checksums;
 *   2. re-laid out: the sections the input's table names (offset and
 *      length clamped to the input) are reassembled into a canonical
 *      bundle with fresh checksums, so that a mutation inside a section
 *      reaches that section's parser instead of stopping at its checksum.
 *      When bit 0 of the compiled entry's flags is set, the compiled
 *      section is derived from the model section (as mr_bundle_write
 *      does), so a mutated model can load and predict.
 * A bundle that loads is then read through every accessor, scored on a
 * small table built from its input schema (nulls, small numbers, known
 * and unknown categories) and exported as ONNX. Aborts when a property
 * bundle.h promises breaks:
 *   - a failure without a message, or with a status bundle.h does not
 *     list for loading (MR_E_CORRUPT; MR_E_NOMEM never happens here);
 *   - accessors that disagree (an input not found by its own name, no
 *     output, a manifest or metrics text that is not a JSON object, a
 *     version id that is not the hash of the bytes);
 *   - a prediction that is not finite, a count of outputs that is not the
 *     bundle's, or a compiled-predictor result that differs from
 *     mr_model_predict_table after mr_features_apply (bit for bit);
 *   - an ONNX export failing with a status other than MR_E_SCHEMA.
 * Also built with any compiler for the corpus replay (replay.c), which
 * ctest runs on tests/fuzz/corpus/bundle. */
#include "millrace/bundle.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define HEADER_FIXED 16u
#define ENTRY_BYTES 40u
#define HASH_BYTES 16u
#define N_ROWS 5
#define ALIGN8(x) (((size_t)(x) + 7) & ~(size_t)7)
#define FLAG_DERIVE_COMPILED 1u /* harness only: the image it builds has flags 0 */

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_bundle: property broken: %s\n", what);
    abort();
}

/* ---- re-layout ---------------------------------------------------------------- */

static void put_hash(uint8_t *p, mr_hash128 h)
{
    mr_le_put64(p, h.hi);
    mr_le_put64(p + 8, h.lo);
}

/* The compiled section mr_bundle_write would store for model bytes m, or
 * nothing (out left empty) when they are not a gbdt model. */
static void derive_compiled(const uint8_t *m, size_t m_len, mr_buf *out)
{
    mr_model *model = NULL;
    mr_gbdt_predictor *pred = NULL;
    if (mr_model_from_bytes(m, m_len, &model, NULL) == MR_OK && mr_model_kind_of(model) == MR_MODEL_GBDT &&
        mr_gbdt_predictor_new(mr_model_gbdt(model), 0, &pred, NULL) == MR_OK)
        check(mr_gbdt_predictor_to_bytes(pred, out) == MR_OK, "a compiled predictor does not serialise");
    mr_gbdt_predictor_free(pred);
    mr_model_free(model);
}

/* Builds into out a canonical bundle of the sections d's table names; 0 when
 * d has no readable table. */
static int relayout(const uint8_t *d, size_t size, mr_buf *out)
{
    if (size < HEADER_FIXED || memcmp(d, MR_BUNDLE_MAGIC, 8)) return 0;
    uint32_t n = mr_le_get32(d + 12);
    if (n < 1 || n > MR_BUNDLE_MAX_SECTIONS || size < HEADER_FIXED + (size_t)n * ENTRY_BYTES) return 0;
    const uint8_t *body[MR_BUNDLE_MAX_SECTIONS], *model = NULL;
    size_t len[MR_BUNDLE_MAX_SECTIONS], model_len = 0;
    uint32_t id[MR_BUNDLE_MAX_SECTIONS], flags[MR_BUNDLE_MAX_SECTIONS];
    for (uint32_t i = 0; i < n; i++) {
        const uint8_t *e = d + HEADER_FIXED + (size_t)i * ENTRY_BYTES;
        uint64_t off = mr_le_get64(e + 8), l = mr_le_get64(e + 16);
        id[i] = mr_le_get32(e);
        flags[i] = mr_le_get32(e + 4);
        if (off > size) off = size;
        if (l > size - off) l = size - off;
        body[i] = d + off;
        len[i] = (size_t)l;
        if (id[i] == MR_BSEC_MODEL && !model) {
            model = body[i];
            model_len = len[i];
        }
    }
    mr_buf derived;
    mr_buf_init(&derived);
    size_t hdr = HEADER_FIXED + (size_t)n * ENTRY_BYTES + HASH_BYTES, at = ALIGN8(hdr);
    uint8_t head[HEADER_FIXED + MR_BUNDLE_MAX_SECTIONS * ENTRY_BYTES + HASH_BYTES];
    memset(head, 0, sizeof(head));
    memcpy(head, d, HEADER_FIXED); /* magic, version and count as given */
    for (uint32_t i = 0; i < n; i++) {
        if (id[i] == MR_BSEC_COMPILED && (flags[i] & FLAG_DERIVE_COMPILED) && model) {
            derived.len = 0;
            derive_compiled(model, model_len, &derived);
            body[i] = derived.len ? (const uint8_t *)derived.data : body[i];
            len[i] = derived.len ? derived.len : len[i];
        }
        uint8_t *e = head + HEADER_FIXED + (size_t)i * ENTRY_BYTES;
        mr_le_put32(e, id[i]);
        mr_le_put64(e + 8, at);
        mr_le_put64(e + 16, len[i]);
        put_hash(e + 24, mr_hash_bytes(len[i] ? (const void *)body[i] : "", len[i]));
        at = ALIGN8(at + len[i]);
    }
    put_hash(head + HEADER_FIXED + (size_t)n * ENTRY_BYTES, mr_hash_bytes(head, HEADER_FIXED + (size_t)n * ENTRY_BYTES));
    check(mr_buf_append(out, head, hdr) == MR_OK, "out of memory");
    static const uint8_t zeros[8];
    for (uint32_t i = 0; i < n; i++) {
        check(mr_buf_append(out, zeros, ALIGN8(out->len) - out->len) == MR_OK, "out of memory");
        if (len[i]) check(mr_buf_append(out, body[i], len[i]) == MR_OK, "out of memory");
    }
    check(mr_buf_append(out, zeros, ALIGN8(out->len) - out->len) == MR_OK, "out of memory");
    mr_buf_free(&derived);
    return 1;
}

/* ---- a loaded bundle ------------------------------------------------------------ */

static int is_json_object(const char *s)
{
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    int ok = json_is_object(j);
    json_decref(j);
    return ok;
}

static mr_column *input_column(const mr_bundle_input *in)
{
    static const char *const cats[N_ROWS - 1] = {"basic", "pro", "", "no such category"};
    static const double nums[N_ROWS - 1] = {0.0, 1.5, -3.25, 1e6};
    mr_dtype t = mr_bundle_input_column_type(in);
    mr_column *c = NULL;
    check(mr_column_new(in->name, t, N_ROWS, &c, NULL) == MR_OK, "out of memory");
    check(mr_column_append_null(c) == MR_OK, "out of memory");
    for (size_t i = 0; i + 1 < N_ROWS; i++) {
        mr_status rc = t == MR_T_FLOAT64  ? mr_column_append_float64(c, nums[i])
                       : t == MR_T_STRING ? mr_column_append_str(c, cats[i], strlen(cats[i]))
                       : t == MR_T_INT64  ? mr_column_append_int64(c, (int64_t)i - 1)
                       : t == MR_T_BOOL   ? mr_column_append_bool(c, (int)(i & 1))
                                          : mr_column_append_null(c);
        check(rc == MR_OK, "out of memory");
    }
    return c;
}

static void score(const mr_bundle *b)
{
    mr_table *t = NULL;
    check(mr_table_new(&t, NULL) == MR_OK, "out of memory");
    for (size_t i = 0; i < mr_bundle_n_inputs(b); i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        if (mr_bundle_input_index(b, in->name) != (ssize_t)i) continue; /* a repeated name: the first one is read */
        check(mr_table_add_column(t, input_column(in), NULL) == MR_OK, "a schema input cannot be a column");
    }
    mr_error err;
    mr_error_init(&err);
    double *pred = NULL, *ref = NULL;
    size_t k = 0, k_ref = 0;
    mr_status rc = mr_bundle_predict_table(b, t, 0, 1, &pred, &k, &err);
    if (rc != MR_OK) {
        /* a table built from the schema fits it: only the transform or the
         * model may refuse it, and then with a message */
        check(err.msg[0] != 0, "predict: a failure without a message");
        check(rc == MR_E_SCHEMA || rc == MR_E_NOT_FOUND || rc == MR_E_PARSE || rc == MR_E_INVALID_ARG,
              "predict: a status bundle.h does not list");
        goto done;
    }
    check(k == mr_bundle_n_outputs(b), "predict: not one value per output");
    for (size_t i = 0; i < N_ROWS * k; i++) check(isfinite(pred[i]), "predict: a prediction that is not finite");
    /* the compiled predictor agrees with the model after the transform */
    {
        const mr_features *fx = mr_bundle_features(b);
        mr_table *xt = NULL;
        mr_error_init(&err);
        if (fx) check(mr_features_apply(fx, t, &xt, &err) == MR_OK, "features: the transform refused what predict took");
        check(mr_model_predict_table(mr_bundle_model(b), fx ? xt : t, 0, &ref, &k_ref, &err) == MR_OK,
              "model: refused what the bundle scored");
        check(k_ref == k && !memcmp(ref, pred, N_ROWS * k * sizeof(double)),
              "predict: the compiled predictor differs from the model");
        mr_table_free(xt);
    }
done:
    mr_free(pred);
    mr_free(ref);
    mr_table_free(t);
}

static void inspect(const mr_bundle *b, const uint8_t *bytes, size_t len)
{
    for (size_t i = 0; i < mr_bundle_n_inputs(b); i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        check(in && in->name, "an input without a name");
        ssize_t at = mr_bundle_input_index(b, in->name);
        check(at >= 0 && (size_t)at <= i && !strcmp(mr_bundle_input_at(b, (size_t)at)->name, in->name),
              "an input not found by its name");
    }
    check(mr_bundle_n_outputs(b) >= 1, "no output");
    for (size_t k = 0; k < mr_bundle_n_outputs(b); k++) check(mr_bundle_output_name(b, k) != NULL, "an output without a name");
    check(is_json_object(mr_bundle_manifest_json(b)), "the manifest is not a JSON object");
    check(is_json_object(mr_bundle_metrics_json(b)), "the metrics are not a JSON object");
    char hex[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(mr_hash_bytes(bytes, len), hex);
    check(!strcmp(hex, mr_bundle_version_id(b)), "the version id is not the hash of the file");
    for (size_t i = 0; i < mr_bundle_n_sections(b); i++) {
        mr_bundle_section_info si;
        mr_bundle_section(b, i, &si);
        check(si.offset + si.length <= len && si.name, "a section outside the file");
    }
    score(b);
    mr_buf onnx;
    mr_buf_init(&onnx);
    mr_error err;
    mr_error_init(&err);
    mr_status rc = mr_bundle_export_onnx(b, &onnx, &err);
    check(rc == MR_OK ? onnx.len > 0 : rc == MR_E_SCHEMA && err.msg[0], "onnx: a failure other than MR_E_SCHEMA");
    mr_buf_free(&onnx);
}

static void load(const uint8_t *bytes, size_t len)
{
    mr_bundle *b = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status rc = mr_bundle_from_bytes(bytes, len, &b, &err);
    if (rc != MR_OK) {
        check(rc == MR_E_CORRUPT && err.code == rc && err.msg[0], "load: a failure other than MR_E_CORRUPT with a message");
        check(b == NULL, "load: a failed load returned a bundle");
        return;
    }
    inspect(b, bytes, len);
    mr_bundle_free(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mr_buf img;
    mr_buf_init(&img);
    int same = relayout(data, size, &img) && img.len == size && !memcmp(img.data, data, size);
    load(data, size);
    if (img.len && !same) load((const uint8_t *)img.data, img.len);
    mr_buf_free(&img);
    return 0;
}
