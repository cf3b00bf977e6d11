/* Model bundles (docs/bundle.md): writing, loading with per-section
 * checksums, the derived input schema, and the one prediction path used by
 * predict, serve and evaluate. Loading only parses data; it never runs
 * anything a bundle contains. */
#include "ml/bundle_int.h"
#include "millrace/profile.h"
#include "millrace/gbdt.h"
#include "millrace/linear.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define HEADER_FIXED 16u  /* magic 8 + version 4 + n_sections 4 */
#define ENTRY_BYTES 40u   /* id 4 + flags 4 + offset 8 + length 8 + hash 16 */
#define HASH_BYTES 16u

#define ALIGN8(x) (((size_t)(x) + 7) & ~(size_t)7)

static int all_zero(const uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i]) return 0;
    return 1;
}

typedef struct section {
    uint32_t id;
    uint64_t offset, length;
    mr_hash128 hash;
} section;

struct mr_bundle {
    mr_model *model;
    mr_features *features;
    mr_gbdt_predictor *pred; /* from the compiled section (gbdt) */
    char *manifest;
    char *metrics;
    mr_profile *profile;     /* NULL: the bundle has no profile section */
    mr__bundle_service_doc *service; /* NULL: no feature service section */
    mr_bundle_input *inputs;
    size_t n_inputs;
    mr_strindex input_ix;    /* input name -> index (mr_bundle_input_index) */
    char **output_names;
    size_t n_outputs;
    section sec[MR_BUNDLE_MAX_SECTIONS];
    size_t n_sec;
    char version_id[MR_HASH_HEX_LEN + 1];
};

const char *mr_bundle_section_name(uint32_t id)
{
    switch (id) {
    case MR_BSEC_MANIFEST: return "manifest";
    case MR_BSEC_FEATURES: return "features";
    case MR_BSEC_MODEL: return "model";
    case MR_BSEC_COMPILED: return "compiled";
    case MR_BSEC_METRICS: return "metrics";
    case MR_BSEC_PROFILE: return "profile";
    case MR_BSEC_SERVICE: return "service";
    default: return "?";
    }
}

void mr_bundle_build_init(mr_bundle_build *b) { memset(b, 0, sizeof(*b)); }

static void put_hash(uint8_t *p, mr_hash128 h)
{
    mr_le_put64(p, h.hi);
    mr_le_put64(p + 8, h.lo);
}
static mr_hash128 get_hash(const uint8_t *p)
{
    mr_hash128 h = {mr_le_get64(p), mr_le_get64(p + 8)};
    return h;
}

/* A malloc'd copy (freed with free(), like jansson's json_dumps output). */
static char *libc_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

/* ---- schema ---------------------------------------------------------------- */

static const char *output_name_of(const void *ctx, size_t id)
{
    return mr_features_output_at((const mr_features *)ctx, id)->name;
}

/* The raw inputs: the features transform's inputs (required when some model
 * feature comes from them), or the model's own features as FLOAT64. */
static mr_status derive_schema(const mr_model *m, const mr_features *fx, mr_bundle_input **out, size_t *n_out,
                               mr_error *err)
{
    size_t nf = mr_model_num_features(m);
    size_t n = fx ? mr_features_n_inputs(fx) : nf;
    mr_bundle_input *in = mr_calloc(n ? n : 1, sizeof(*in));
    if (!in) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (!fx) {
        for (size_t j = 0; j < nf; j++) {
            in[j].name = mr_model_feature_name(m, j);
            in[j].type = MR_T_FLOAT64;
            in[j].required = 1;
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            const mr_features_input *fi = mr_features_input_at(fx, i);
            in[i].name = fi->name;
            in[i].type = fi->train_type;
            in[i].categorical = fi->categorical;
        }
        mr_strindex outs; /* output name -> index: O(1) per model feature */
        mr_strindex_init(&outs);
        mr_status rc = mr_strindex_reserve(&outs, mr_features_n_outputs(fx));
        for (size_t q = 0; rc == MR_OK && q < mr_features_n_outputs(fx); q++)
            rc = mr_strindex_add(&outs, q, output_name_of, fx, NULL);
        if (rc != MR_OK) {
            mr_strindex_deinit(&outs);
            mr_free(in);
            return MR_ERR(err, rc, "out of memory");
        }
        for (size_t j = 0; j < nf; j++) {
            const char *name = mr_model_feature_name(m, j);
            ssize_t q = mr_strindex_find(&outs, name, output_name_of, fx);
            const mr_features_output *o = q >= 0 ? mr_features_output_at(fx, (size_t)q) : NULL;
            if (!o) {
                mr_strindex_deinit(&outs);
                mr_free(in);
                MR_ERR(err, MR_E_SCHEMA, "model feature '%s' is not an output of the features transform", name);
                mr_error_key(err, name);
                mr_error_hint(err,
                              "a column the features stage keeps (an id) or that it never saw is no feature: train "
                              "without it (the train stage's exclude: [%s])",
                              name);
                return MR_E_SCHEMA;
            }
            in[o->input].required = 1;
        }
        mr_strindex_deinit(&outs);
    }
    *out = in;
    *n_out = n;
    return MR_OK;
}

/* ---- writing --------------------------------------------------------------- */

static json_t *manifest_json(const mr_bundle_build *b, const mr_bundle_input *in, size_t n_in, json_t *metrics,
                             const mr_gbdt_predictor *pred)
{
    const mr_model *m = b->model;
    json_t *j = json_object(), *ins = json_array(), *outs = json_array(), *feats = json_array();
    json_t *lin = json_object(), *arts = json_array(), *model = json_object();
    for (size_t i = 0; i < n_in; i++)
        json_array_append_new(ins, json_pack("{s:s,s:s,s:b,s:b}", "name", in[i].name, "type", mr_dtype_name(in[i].type),
                                             "categorical", in[i].categorical, "required", in[i].required));
    size_t k = mr_model_num_outputs(m);
    for (size_t q = 0; q < k; q++) {
        char name[32];
        if (k == 1) snprintf(name, sizeof(name), "prediction");
        else snprintf(name, sizeof(name), "prediction_%zu", q);
        json_array_append_new(outs, json_string(name));
    }
    for (size_t f = 0; f < mr_model_num_features(m); f++) json_array_append_new(feats, json_string(mr_model_feature_name(m, f)));
    json_object_set_new(model, "kind", json_string(mr_model_kind_name(m)));
    json_object_set_new(model, "objective", json_string(mr_model_objective_name(m)));
    json_object_set_new(model, "features", feats);
    if (pred) json_object_set_new(model, "trees", json_integer((json_int_t)mr_gbdt_model_num_trees(mr_model_gbdt(m))));
    json_object_set_new(lin, "run_id", b->run_id ? json_integer(b->run_id) : json_null());
    json_object_set_new(lin, "stage", b->stage ? json_string(b->stage) : json_null());
    json_object_set_new(lin, "stage_key", b->stage_key ? json_string(b->stage_key) : json_null());
    json_object_set_new(lin, "git_commit", b->git_commit && b->git_commit[0] ? json_string(b->git_commit) : json_null());
    for (size_t a = 0; a < b->n_artifacts; a++)
        json_array_append_new(arts, json_pack("{s:s,s:o}", "name", b->artifact_names[a] ? b->artifact_names[a] : "",
                                              "id", b->artifact_ids && b->artifact_ids[a] ? json_string(b->artifact_ids[a])
                                                                                          : json_null()));
    json_object_set_new(lin, "artifacts", arts);
    json_object_set_new(j, "format", json_string("millrace-bundle/1"));
    json_object_set_new(j, "created_by", json_string("millrace " MILLRACE_VERSION));
    json_object_set_new(j, "name", b->name ? json_string(b->name) : json_null());
    json_object_set_new(j, "inputs", ins);
    json_object_set_new(j, "outputs", outs);
    json_object_set_new(j, "objective", json_string(mr_model_objective_name(m)));
    json_object_set_new(j, "model", model);
    json_object_set_new(j, "features_transform", json_boolean(b->features != NULL));
    json_object_set_new(j, "compiled", pred ? json_string("MRGP/1") : json_null());
    json_object_set_new(j, "metrics", metrics ? json_incref(metrics) : json_object());
    json_object_set_new(j, "lineage", lin);
    return j;
}

mr_status mr_bundle_write(const mr_bundle_build *b, mr_buf *out, mr_error *err)
{
    mr_status rc = MR_OK;
    mr_buf body[MR_BUNDLE_MAX_SECTIONS];
    uint32_t ids[MR_BUNDLE_MAX_SECTIONS];
    size_t n = 0;
    mr_bundle_input *in = NULL;
    size_t n_in = 0;
    json_t *metrics = NULL, *man = NULL;
    char *man_text = NULL, *met_text = NULL;
    mr_gbdt_predictor *pred = NULL;
    /* jansson can lose a key or a character to a failed allocation and
     * still dump a document: any failure until the texts exist is out of
     * memory, never a bundle with a short manifest */
    uint64_t oom_w = mr_alloc_failures_here();
    for (size_t i = 0; i < MR_BUNDLE_MAX_SECTIONS; i++) mr_buf_init(&body[i]);
    if (!b->model) return MR_ERR(err, MR_E_INVALID_ARG, "a bundle needs a model");
    if (b->metrics_json) {
        json_error_t je;
        uint64_t oom0 = mr_alloc_failures_here();
        metrics = json_loads(b->metrics_json, 0, &je);
        if (mr_alloc_failures_here() != oom0) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory reading the metrics");
            goto done;
        }
        if (!json_is_object(metrics)) {
            rc = MR_ERR(err, MR_E_PARSE, "metrics: expected a JSON object (%s at line %d col %d)", je.text, je.line,
                        je.column);
            goto done;
        }
    }
    rc = derive_schema(b->model, b->features, &in, &n_in, err);
    if (rc != MR_OK) goto done;
    if (mr_model_kind_of(b->model) == MR_MODEL_GBDT) {
        rc = mr_gbdt_predictor_new(mr_model_gbdt(b->model), 0, &pred, err);
        if (rc != MR_OK) goto done;
    }
    man = manifest_json(b, in, n_in, metrics, pred);
    man_text = man ? json_dumps(man, JSON_INDENT(2)) : NULL;
    met_text = metrics ? json_dumps(metrics, JSON_INDENT(2)) : libc_strdup("{}");
    if (!man_text || !met_text || mr_alloc_failures_here() != oom_w) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    ids[n] = MR_BSEC_MANIFEST;
    rc = mr_buf_puts(&body[n++], man_text);
    if (rc == MR_OK && b->features) {
        ids[n] = MR_BSEC_FEATURES;
        rc = mr_features_save(b->features, &body[n++]);
    }
    if (rc == MR_OK) {
        ids[n] = MR_BSEC_MODEL;
        rc = mr_model_to_bytes(b->model, &body[n++], err);
    }
    if (rc == MR_OK && pred) {
        ids[n] = MR_BSEC_COMPILED;
        rc = mr_gbdt_predictor_to_bytes(pred, &body[n++]);
    }
    if (rc == MR_OK && metrics) {
        ids[n] = MR_BSEC_METRICS;
        rc = mr_buf_puts(&body[n++], met_text);
    }
    if (rc == MR_OK && b->profile_json) {
        mr_profile *check = NULL; /* what a loader will refuse is never written */
        rc = mr_profile_parse(b->profile_json, strlen(b->profile_json), &check, err);
        for (size_t k = 0; rc == MR_OK && k < mr_profile_n_columns(check); k++) {
            const char *nm = mr_profile_column_at(check, k)->name;
            size_t j = 0;
            while (j < n_in && strcmp(in[j].name, nm)) j++;
            if (j == n_in) rc = MR_ERR(err, MR_E_SCHEMA, "the profile names '%s', which is no input of the bundle", nm);
        }
        mr_profile_free(check);
        if (rc != MR_OK) goto done;
        ids[n] = MR_BSEC_PROFILE;
        rc = mr_buf_puts(&body[n++], b->profile_json);
    }
    if (rc == MR_OK && b->service_json) {
        mr__bundle_service_doc *check = NULL;
        rc = mr__bundle_service_parse(b->service_json, strlen(b->service_json), in, n_in, &check, err);
        mr__bundle_service_free(check);
        if (rc == MR_E_PARSE) {
            char msg[MR_ERR_MSG_MAX];
            snprintf(msg, sizeof(msg), "%s", err ? err->msg : "invalid");
            rc = MR_ERR(err, MR_E_SCHEMA, "the feature service: %s", msg);
        }
        if (rc != MR_OK) goto done;
        ids[n] = MR_BSEC_SERVICE;
        rc = mr_buf_puts(&body[n++], b->service_json);
    }
    if (rc != MR_OK) {
        rc = MR_ERR(err, rc, "cannot serialise the bundle");
        goto done;
    }
    {
        size_t hdr = HEADER_FIXED + n * ENTRY_BYTES + HASH_BYTES;
        size_t off = (hdr + 7) & ~(size_t)7;
        uint8_t head[HEADER_FIXED + MR_BUNDLE_MAX_SECTIONS * ENTRY_BYTES + HASH_BYTES];
        memset(head, 0, sizeof(head));
        memcpy(head, MR_BUNDLE_MAGIC, 8);
        mr_le_put32(head + 8, MR_BUNDLE_VERSION);
        mr_le_put32(head + 12, (uint32_t)n);
        size_t offs[MR_BUNDLE_MAX_SECTIONS];
        for (size_t i = 0; i < n; i++) {
            uint8_t *e = head + HEADER_FIXED + i * ENTRY_BYTES;
            offs[i] = off;
            mr_le_put32(e, ids[i]);
            mr_le_put32(e + 4, 0);
            mr_le_put64(e + 8, off);
            mr_le_put64(e + 16, body[i].len);
            put_hash(e + 24, mr_hash_bytes(body[i].data ? body[i].data : "", body[i].len));
            off = (off + body[i].len + 7) & ~(size_t)7;
        }
        put_hash(head + HEADER_FIXED + n * ENTRY_BYTES, mr_hash_bytes(head, HEADER_FIXED + n * ENTRY_BYTES));
        size_t base = out->len;
        rc = mr_buf_append(out, head, hdr);
        static const char zeros[8] = {0};
        for (size_t i = 0; rc == MR_OK && i < n; i++) {
            size_t pad = offs[i] - (out->len - base);
            if (pad) rc = mr_buf_append(out, zeros, pad);
            if (rc == MR_OK && body[i].len) rc = mr_buf_append(out, body[i].data, body[i].len);
        }
        if (rc == MR_OK && (out->len - base) % 8) rc = mr_buf_append(out, zeros, 8 - (out->len - base) % 8);
        if (rc != MR_OK) rc = MR_ERR(err, rc, "out of memory writing the bundle");
    }
done:
    for (size_t i = 0; i < MR_BUNDLE_MAX_SECTIONS; i++) mr_buf_free(&body[i]);
    mr_gbdt_predictor_free(pred);
    free(man_text);
    free(met_text);
    json_decref(man);
    json_decref(metrics);
    mr_free(in);
    return rc;
}

mr_status mr_bundle_save(const mr_bundle_build *b, const char *path, mr_error *err)
{
    mr_buf buf;
    mr_buf_init(&buf);
    buf.limit = MR_BUNDLE_MAX_BYTES;
    mr_status rc = mr_bundle_write(b, &buf, err);
    if (rc == MR_OK) rc = mr_fs_write_atomic(path, buf.data, buf.len, err);
    mr_buf_free(&buf);
    return rc;
}

/* ---- loading --------------------------------------------------------------- */

static const char *input_name_of(const void *ctx, size_t id) { return ((const mr_bundle *)ctx)->inputs[id].name; }

void mr_bundle_free(mr_bundle *b)
{
    if (!b) return;
    mr_model_free(b->model);
    mr_features_free(b->features);
    mr_gbdt_predictor_free(b->pred);
    free(b->manifest); /* jansson-allocated */
    free(b->metrics);
    mr_profile_free(b->profile);
    mr__bundle_service_free(b->service);
    mr_free(b->inputs);
    mr_strindex_deinit(&b->input_ix);
    for (size_t k = 0; b->output_names && k < b->n_outputs; k++) mr_free(b->output_names[k]); /* NULL: its allocation failed */
    mr_free(b->output_names);
    mr_free(b);
}

static mr_status sec_fail(mr_error *err, uint32_t id, mr_status code, const char *what)
{
    return MR_ERR(err, code, "section '%s': %s", mr_bundle_section_name(id), what);
}

/* The manifest's "inputs" must agree with the schema derived from the
 * sections (names, order, types). */
static mr_status check_manifest(mr_bundle *b, const char *text, size_t len, mr_error *err)
{
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *j = json_loadb(text, len, 0, &je);
    mr_status rc = MR_OK;
    if (mr_alloc_failures_here() != oom0) {
        rc = sec_fail(err, MR_BSEC_MANIFEST, MR_E_NOMEM, "out of memory");
        goto done;
    }
    if (!json_is_object(j)) {
        rc = MR_ERR(err, MR_E_CORRUPT, "section 'manifest': not a JSON object (%s at byte %d)", je.text, je.position);
        goto done;
    }
    const char *fmt = json_string_value(json_object_get(j, "format"));
    if (!fmt || strcmp(fmt, "millrace-bundle/1") != 0) {
        rc = sec_fail(err, MR_BSEC_MANIFEST, MR_E_CORRUPT, "format is not millrace-bundle/1");
        goto done;
    }
    json_t *ins = json_object_get(j, "inputs");
    if (!json_is_array(ins) || json_array_size(ins) != b->n_inputs) {
        rc = sec_fail(err, MR_BSEC_MANIFEST, MR_E_CORRUPT, "inputs disagree with the features and model sections");
        goto done;
    }
    for (size_t i = 0; i < b->n_inputs; i++) {
        json_t *e = json_array_get(ins, i);
        const char *name = json_string_value(json_object_get(e, "name"));
        const char *type = json_string_value(json_object_get(e, "type"));
        if (!name || !type || strcmp(name, b->inputs[i].name) || strcmp(type, mr_dtype_name(b->inputs[i].type))) {
            rc = sec_fail(err, MR_BSEC_MANIFEST, MR_E_CORRUPT, "inputs disagree with the features and model sections");
            goto done;
        }
    }
    b->manifest = json_dumps(j, JSON_INDENT(2));
    if (!b->manifest || mr_alloc_failures_here() != oom0) rc = sec_fail(err, MR_BSEC_MANIFEST, MR_E_NOMEM, "out of memory");
done:
    json_decref(j);
    return rc;
}

/* The sections of one bundle, by section id, as read from its table. */
typedef struct sections {
    const uint8_t *body[MR_BUNDLE_MAX_SECTIONS + 1];
    size_t len[MR_BUNDLE_MAX_SECTIONS + 1];
    int seen[MR_BUNDLE_MAX_SECTIONS + 1];
} sections;

/* Prefixes err's message with the section's name. A section that does not
 * decode is corrupt; running out of memory while decoding it stays
 * MR_E_NOMEM. Returns the status to report. */
static mr_status sec_wrap(mr_error *err, uint32_t id, mr_status rc, const char *fallback)
{
    if (rc == MR_E_NOMEM) return rc;
    char m[MR_ERR_MSG_MAX];
    snprintf(m, sizeof(m), "%s", err ? err->msg : fallback);
    if (err) mr_error_clear(err);
    return MR_ERR(err, MR_E_CORRUPT, "section '%s': %s", mr_bundle_section_name(id), m);
}

/* Checks the section table of p[0, len) (n entries, then its hash at
 * table_end) and every section's placement, padding and checksum, filling
 * b->sec and *sx. No byte goes unchecked: sections follow one another in
 * table order at the next 8-byte boundary, the padding before each and
 * after the last is zero, and the file ends there. */
static mr_status read_sections(const uint8_t *p, size_t len, size_t table_end, mr_bundle *b, sections *sx,
                               mr_error *err)
{
    size_t at = table_end + HASH_BYTES; /* end of what is checked so far: the next padding starts here */
    for (size_t i = 0; i < b->n_sec; i++) {
        const uint8_t *e = p + HEADER_FIXED + i * ENTRY_BYTES;
        section *s = &b->sec[i];
        s->id = mr_le_get32(e);
        s->offset = mr_le_get64(e + 8);
        s->length = mr_le_get64(e + 16);
        s->hash = get_hash(e + 24);
        if (s->id < MR_BSEC_MANIFEST || s->id > MR_BSEC_SERVICE)
            return MR_ERR(err, MR_E_CORRUPT, "section table: unknown section id %u", s->id);
        if (sx->seen[s->id]++) return sec_fail(err, s->id, MR_E_CORRUPT, "appears twice");
        if (s->offset < table_end + HASH_BYTES || s->offset > len || s->length > len - s->offset)
            return MR_ERR(err, MR_E_CORRUPT, "section '%s': truncated (bytes %llu..%llu, file has %zu)",
                          mr_bundle_section_name(s->id), (unsigned long long)s->offset,
                          (unsigned long long)(s->offset + s->length), len);
        if (s->offset != ALIGN8(at))
            return MR_ERR(err, MR_E_CORRUPT, "section '%s': starts at byte %llu, expected %zu (the next 8-byte boundary)",
                          mr_bundle_section_name(s->id), (unsigned long long)s->offset, ALIGN8(at));
        if (!all_zero(p + at, (size_t)s->offset - at))
            return MR_ERR(err, MR_E_CORRUPT, "padding before section '%s' (bytes %zu..%llu) is not zero",
                          mr_bundle_section_name(s->id), at, (unsigned long long)s->offset);
        if (!mr_hash_eq(s->hash, mr_hash_bytes(p + s->offset, (size_t)s->length)))
            return sec_fail(err, s->id, MR_E_CORRUPT, "checksum mismatch");
        at = (size_t)(s->offset + s->length);
        sx->body[s->id] = p + s->offset;
        sx->len[s->id] = (size_t)s->length;
    }
    if (len != ALIGN8(at))
        return MR_ERR(err, MR_E_CORRUPT, "file has %zu bytes, its last section ends at %zu (padded: %zu)", len, at,
                      ALIGN8(at));
    if (!all_zero(p + at, len - at))
        return MR_ERR(err, MR_E_CORRUPT, "padding after the last section (bytes %zu..%zu) is not zero", at, len);
    if (!sx->seen[MR_BSEC_MANIFEST] || !sx->seen[MR_BSEC_MODEL])
        return sec_fail(err, sx->seen[MR_BSEC_MANIFEST] ? MR_BSEC_MODEL : MR_BSEC_MANIFEST, MR_E_CORRUPT, "missing");
    return MR_OK;
}

/* A gbdt bundle's compiled predictor: decoded, and exactly what this build
 * derives from the model section (then it predicts bit-identically to it).
 * A linear bundle has none. */
static mr_status load_compiled(mr_bundle *b, const sections *sx, mr_error *err)
{
    const uint8_t *body = sx->body[MR_BSEC_COMPILED];
    size_t blen = sx->len[MR_BSEC_COMPILED];
    if (mr_model_kind_of(b->model) != MR_MODEL_GBDT)
        return sx->seen[MR_BSEC_COMPILED] ? sec_fail(err, MR_BSEC_COMPILED, MR_E_CORRUPT, "present for a linear model")
                                          : MR_OK;
    if (!sx->seen[MR_BSEC_COMPILED])
        return sec_fail(err, MR_BSEC_COMPILED, MR_E_CORRUPT, "missing (gbdt bundles carry a compiled predictor)");
    mr_status rc = mr_gbdt_predictor_from_bytes(body, blen, &b->pred, err);
    if (rc != MR_OK) return sec_wrap(err, MR_BSEC_COMPILED, rc, "invalid");
    mr_gbdt_predictor *fresh = NULL;
    mr_buf again;
    mr_buf_init(&again);
    again.limit = MR_BUNDLE_MAX_BYTES;
    rc = mr_gbdt_predictor_new(mr_model_gbdt(b->model), 0, &fresh, err);
    if (rc == MR_OK && (rc = mr_gbdt_predictor_to_bytes(fresh, &again)) != MR_OK)
        rc = MR_ERR(err, rc, "section 'compiled': cannot encode the predictor derived from the model");
    int same = rc == MR_OK && again.len == blen && memcmp(again.data, body, again.len) == 0;
    mr_gbdt_predictor_free(fresh);
    mr_buf_free(&again);
    if (rc == MR_OK && !same) rc = sec_fail(err, MR_BSEC_COMPILED, MR_E_CORRUPT, "does not match the model section");
    return rc;
}

/* The input schema (and its name index) the model and features imply. */
static mr_status load_inputs(mr_bundle *b, mr_error *err)
{
    mr_status rc = derive_schema(b->model, b->features, &b->inputs, &b->n_inputs, err);
    if (rc == MR_OK) rc = mr_strindex_reserve(&b->input_ix, b->n_inputs);
    for (size_t i = 0; rc == MR_OK && i < b->n_inputs; i++)
        rc = mr_strindex_add(&b->input_ix, i, input_name_of, b, NULL); /* a repeated name keeps its first input */
    if (rc == MR_E_NOMEM) return MR_ERR(err, rc, "out of memory");
    return rc == MR_OK ? MR_OK : sec_wrap(err, MR_BSEC_FEATURES, rc, "inconsistent");
}

/* The optional metrics section (a JSON object; "{}" without one) and the
 * output names. */
static mr_status load_metrics_outputs(mr_bundle *b, const sections *sx, mr_error *err)
{
    if (sx->seen[MR_BSEC_METRICS]) {
        json_error_t je;
        uint64_t oom0 = mr_alloc_failures_here();
        json_t *mj = json_loadb((const char *)sx->body[MR_BSEC_METRICS], sx->len[MR_BSEC_METRICS], 0, &je);
        if (mr_alloc_failures_here() != oom0) {
            json_decref(mj);
            return sec_fail(err, MR_BSEC_METRICS, MR_E_NOMEM, "out of memory");
        }
        if (!json_is_object(mj)) {
            json_decref(mj);
            return MR_ERR(err, MR_E_CORRUPT, "section 'metrics': not a JSON object (%s at byte %d)", je.text,
                          je.position);
        }
        b->metrics = json_dumps(mj, JSON_COMPACT);
        json_decref(mj);
        if (b->metrics && mr_alloc_failures_here() != oom0) { /* (a key or character lost) */
            free(b->metrics);
            b->metrics = NULL; /* reported below */
        }
    } else {
        b->metrics = libc_strdup("{}");
    }
    b->n_outputs = mr_model_num_outputs(b->model);
    b->output_names = mr_calloc(b->n_outputs, sizeof(char *));
    for (size_t k = 0; b->output_names && k < b->n_outputs; k++)
        b->output_names[k] = b->n_outputs == 1 ? mr_strdup("prediction") : mr_asprintf("prediction_%zu", k);
    int names_ok = b->output_names != NULL;
    for (size_t k = 0; names_ok && k < b->n_outputs; k++) names_ok = b->output_names[k] != NULL;
    if (!b->metrics || !names_ok) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    return MR_OK;
}

mr_status mr_bundle_from_bytes(const void *data, size_t len, mr_bundle **out, mr_error *err)
{
    *out = NULL;
    const uint8_t *p = data;
    if (len < HEADER_FIXED) return MR_ERR(err, MR_E_CORRUPT, "header: truncated (%zu bytes)", len);
    if (memcmp(p, MR_BUNDLE_MAGIC, 8) != 0) return MR_ERR(err, MR_E_CORRUPT, "header: bad magic (not a millrace bundle)");
    uint32_t ver = mr_le_get32(p + 8), n = mr_le_get32(p + 12);
    if (ver != MR_BUNDLE_VERSION) {
        MR_ERR(err, MR_E_CORRUPT, "header: unsupported bundle format version %u (this millrace reads version %u)", ver,
               MR_BUNDLE_VERSION);
        mr_error_hint(err, "%s", ver < MR_BUNDLE_VERSION ? "re-package the model with this millrace (`millrace run` the package stage)"
                                                         : "use the millrace that wrote it, or a newer one");
        return MR_E_CORRUPT;
    }
    if (n < 1 || n > MR_BUNDLE_MAX_SECTIONS) return MR_ERR(err, MR_E_CORRUPT, "header: %u sections (1..16 allowed)", n);
    size_t table_end = HEADER_FIXED + (size_t)n * ENTRY_BYTES;
    if (len < table_end + HASH_BYTES) return MR_ERR(err, MR_E_CORRUPT, "section table: truncated");
    if (!mr_hash_eq(get_hash(p + table_end), mr_hash_bytes(p, table_end)))
        return MR_ERR(err, MR_E_CORRUPT, "section table: checksum mismatch");
    mr_bundle *b = mr_calloc(1, sizeof(*b));
    if (!b) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    b->n_sec = n;
    sections sx;
    memset(&sx, 0, sizeof(sx));
    mr_status rc = read_sections(p, len, table_end, b, &sx, err);
    if (rc == MR_OK && sx.seen[MR_BSEC_FEATURES]) {
        rc = mr_features_load(sx.body[MR_BSEC_FEATURES], sx.len[MR_BSEC_FEATURES], &b->features, err);
        if (rc != MR_OK) rc = sec_wrap(err, MR_BSEC_FEATURES, rc, "invalid");
    }
    if (rc == MR_OK) {
        rc = mr_model_from_bytes(sx.body[MR_BSEC_MODEL], sx.len[MR_BSEC_MODEL], &b->model, err);
        if (rc != MR_OK) rc = sec_wrap(err, MR_BSEC_MODEL, rc, "invalid model");
    }
    if (rc == MR_OK) rc = load_compiled(b, &sx, err);
    if (rc == MR_OK) rc = load_inputs(b, err);
    if (rc == MR_OK) rc = check_manifest(b, (const char *)sx.body[MR_BSEC_MANIFEST], sx.len[MR_BSEC_MANIFEST], err);
    if (rc == MR_OK) rc = load_metrics_outputs(b, &sx, err);
    if (rc == MR_OK && sx.seen[MR_BSEC_PROFILE]) {
        rc = mr_profile_parse((const char *)sx.body[MR_BSEC_PROFILE], sx.len[MR_BSEC_PROFILE], &b->profile, err);
        if (rc != MR_OK) rc = sec_wrap(err, MR_BSEC_PROFILE, rc, "invalid");
        for (size_t k = 0; rc == MR_OK && k < mr_profile_n_columns(b->profile); k++) {
            const mr_profile_column *c = mr_profile_column_at(b->profile, k);
            ssize_t j = mr_bundle_input_index(b, c->name);
            if (j < 0)
                rc = MR_ERR(err, MR_E_CORRUPT, "section 'profile': column '%s' is no input of the bundle", c->name);
            else if (c->categorical != b->inputs[j].categorical)
                rc = MR_ERR(err, MR_E_CORRUPT, "section 'profile': column '%s' is %s in the profile, not in the schema",
                            c->name, c->categorical ? "categorical" : "numeric");
        }
    }
    if (rc == MR_OK && sx.seen[MR_BSEC_SERVICE]) {
        rc = mr__bundle_service_parse((const char *)sx.body[MR_BSEC_SERVICE], sx.len[MR_BSEC_SERVICE], b->inputs,
                                      b->n_inputs, &b->service, err);
        if (rc != MR_OK) rc = sec_wrap(err, MR_BSEC_SERVICE, rc == MR_E_PARSE ? MR_E_CORRUPT : rc, "invalid");
    }
    if (rc != MR_OK) {
        mr_bundle_free(b);
        return rc;
    }
    mr_hash_hex(mr_hash_bytes(data, len), b->version_id);
    *out = b;
    return MR_OK;
}

mr_status mr_bundle_load(const char *path, mr_bundle **out, mr_error *err)
{
    char *data = NULL;
    size_t len = 0;
    *out = NULL;
    mr_status rc = mr_fs_read_file(path, MR_BUNDLE_MAX_BYTES, &data, &len, err);
    if (rc == MR_OK) rc = mr_bundle_from_bytes(data, len, out, err);
    if (rc != MR_OK && err && !err->file[0]) mr_error_at(err, path, 0, 0);
    mr_free(data);
    return rc;
}

/* ---- accessors ------------------------------------------------------------- */

size_t mr_bundle_n_inputs(const mr_bundle *b) { return b->n_inputs; }
const mr_bundle_input *mr_bundle_input_at(const mr_bundle *b, size_t i)
{
    return i < b->n_inputs ? &b->inputs[i] : NULL;
}
ssize_t mr_bundle_input_index(const mr_bundle *b, const char *name)
{
    return mr_strindex_find(&b->input_ix, name, input_name_of, b);
}
size_t mr_bundle_n_outputs(const mr_bundle *b) { return b->n_outputs; }
const char *mr_bundle_output_name(const mr_bundle *b, size_t k) { return k < b->n_outputs ? b->output_names[k] : NULL; }
const mr_model *mr_bundle_model(const mr_bundle *b) { return b->model; }
const mr_features *mr_bundle_features(const mr_bundle *b) { return b->features; }
const char *mr_bundle_manifest_json(const mr_bundle *b) { return b->manifest; }
const char *mr_bundle_metrics_json(const mr_bundle *b) { return b->metrics; }
const mr_profile *mr_bundle_profile(const mr_bundle *b) { return b->profile; }
const mr_bundle_service *mr_bundle_service_of(const mr_bundle *b) { return mr__bundle_service_get(b->service); }
const char *mr_bundle_version_id(const mr_bundle *b) { return b->version_id; }
size_t mr_bundle_n_sections(const mr_bundle *b) { return b->n_sec; }
void mr_bundle_section(const mr_bundle *b, size_t i, mr_bundle_section_info *out)
{
    const section *s = &b->sec[i];
    out->id = s->id;
    out->name = mr_bundle_section_name(s->id);
    out->offset = s->offset;
    out->length = s->length;
    mr_hash_hex(s->hash, out->hash);
}

/* ---- prediction ------------------------------------------------------------ */

mr_status mr_bundle_predict_table(const mr_bundle *b, const mr_table *t, int raw, int num_threads, double **out,
                                  size_t *n_outputs, mr_error *err)
{
    *out = NULL;
    mr_table view, *xt = NULL;
    mr_column **owned = NULL;
    mr_status rc = mr__bundle_input_view(b, t, &view, &owned, err); /* the inputs in schema order */
    if (rc != MR_OK) return rc;
    size_t n = t->n_rows, k = b->n_outputs;
    float *x = NULL;
    double *pred = mr_malloc((n * k > 0 ? n * k : 1) * sizeof(double));
    if (!pred) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory for %zu predictions", n);
        goto done;
    }
    if (b->features) {
        rc = mr_features_apply(b->features, &view, &xt, err);
        if (rc != MR_OK) goto done;
    }
    rc = mr_model_matrix(b->model, xt ? xt : &view, &x, err);
    if (rc != MR_OK || !n) goto done;
    if (b->pred)
        rc = mr_gbdt_predictor_batch(b->pred, x, n, MR_GBDT_COL_MAJOR, raw, num_threads, pred, err);
    else
        rc = mr_linear_predict(mr_model_linear(b->model), x, n, MR_GBDT_COL_MAJOR, raw, pred, err);
done:
    mr_free(x);
    mr_table_free(xt);
    mr__bundle_input_view_free(b, &view, owned);
    if (rc != MR_OK) {
        mr_free(pred);
        return rc;
    }
    *out = pred;
    *n_outputs = k;
    return MR_OK;
}
