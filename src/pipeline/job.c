/* Job and result files (include/millrace/job.h, docs/formats.md "Job
 * files"): the one encoder and decoder of each.
 *
 * A value of the stage definition or its params is encoded as a node that
 * keeps its type and its origin:
 *
 *   node   = [line, col, payload]            line/col: 1-based, 0 = synthetic
 *          | [line, col, payload, text]      text: a scalar's original text ("0.10")
 *   payload = null | true | false | integer | real | string
 *          | {"float": "inf" | "-inf" | "nan"}          (JSON has no such numbers)
 *          | {"seq": [node, ...]}
 *          | {"map": [[key, key_line, key_col, node], ...]}   (source order)
 *
 * so an int stays an int (7), a float a float (7.0), "7" a string, and a
 * decoded tree equals the encoded one (mr_value_equal) with every position. */
#include "millrace/job.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#define JOB_MAX_BYTES ((size_t)256 << 20)

/* ---- value nodes ------------------------------------------------------------ */

static json_t *enc_value(const mr_value *v);

static json_t *enc_payload(const mr_value *v)
{
    switch (v->kind) {
    case MR_V_NULL: return json_null();
    case MR_V_BOOL: return json_boolean(v->u.b);
    case MR_V_INT: return json_integer((json_int_t)v->u.i);
    case MR_V_FLOAT:
        if (isfinite(v->u.f)) return json_real(v->u.f);
        return json_pack("{s:s}", "float", isnan(v->u.f) ? "nan" : v->u.f > 0 ? "inf" : "-inf");
    case MR_V_STR: return json_string(v->str ? v->str : "");
    case MR_V_SEQ: {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < v->n; i++)
            if (json_array_append_new(arr, enc_value(v->items[i])) != 0) {
                json_decref(arr);
                return NULL;
            }
        return arr ? json_pack("{s:o}", "seq", arr) : NULL;
    }
    case MR_V_MAP: {
        json_t *arr = json_array();
        for (size_t i = 0; arr && i < v->n; i++) {
            json_t *e = json_pack("[s,I,I,o]", v->keys[i], (json_int_t)(v->key_lines ? v->key_lines[i] : 0),
                                  (json_int_t)(v->key_cols ? v->key_cols[i] : 0), enc_value(v->items[i]));
            if (json_array_append_new(arr, e) != 0) {
                json_decref(arr);
                return NULL;
            }
        }
        return arr ? json_pack("{s:o}", "map", arr) : NULL;
    }
    }
    return NULL;
}

static json_t *enc_value(const mr_value *v)
{
    json_t *payload = enc_payload(v);
    if (!payload) return NULL;
    json_t *node = json_pack("[I,I,o]", (json_int_t)v->line, (json_int_t)v->col, payload);
    /* Non-string scalars keep the text they were written as (for messages). */
    if (node && v->str && v->kind != MR_V_STR && v->kind != MR_V_MAP && v->kind != MR_V_SEQ &&
        json_array_append_new(node, json_string(v->str)) != 0) {
        json_decref(node);
        return NULL;
    }
    return node;
}

typedef struct dec {
    const char *path;
    mr_error *err;
} dec;

static mr_status bad(dec *d, const char *what)
{
    return MR_ERR(d->err, MR_E_PARSE, "%s: not a millrace job file: %s", d->path, what);
}

static mr_status dec_value(dec *d, const json_t *node, mr_value **out);

static mr_status dec_map(dec *d, const json_t *arr, mr_value *map)
{
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        const json_t *k = json_array_get(e, 0), *kl = json_array_get(e, 1), *kc = json_array_get(e, 2);
        if (!json_is_array(e) || json_array_size(e) != 4 || !json_is_string(k) || !json_is_integer(kl) ||
            !json_is_integer(kc))
            return bad(d, "a map entry is not [key, line, col, node]");
        mr_value *item = NULL;
        mr_status rc = dec_value(d, json_array_get(e, 3), &item);
        if (rc != MR_OK) return rc;
        size_t before = map->n;
        if (mr_value_map_set(map, json_string_value(k), item) != MR_OK) return MR_ERR(d->err, MR_E_NOMEM, "out of memory");
        if (map->n == before) return bad(d, "a map has a key twice");
        map->key_lines[before] = (long)json_integer_value(kl);
        map->key_cols[before] = (long)json_integer_value(kc);
    }
    return MR_OK;
}

static mr_status dec_payload(dec *d, const json_t *p, mr_value **out)
{
    mr_value *v = NULL;
    mr_status rc = MR_OK;
    switch (json_typeof(p)) {
    case JSON_NULL: v = mr_value_new(MR_V_NULL); break;
    case JSON_TRUE:
    case JSON_FALSE: v = mr_value_new_bool(json_is_true(p)); break;
    case JSON_INTEGER: v = mr_value_new_int((int64_t)json_integer_value(p)); break;
    case JSON_REAL: v = mr_value_new_float(json_real_value(p)); break;
    case JSON_STRING: v = mr_value_new_str(json_string_value(p)); break;
    case JSON_ARRAY: return bad(d, "a value payload is a bare array");
    case JSON_OBJECT: {
        const json_t *seq = json_object_get(p, "seq"), *map = json_object_get(p, "map"), *f = json_object_get(p, "float");
        if (json_object_size(p) != 1) return bad(d, "a value payload object has not exactly one key");
        if (json_is_string(f)) {
            const char *s = json_string_value(f);
            double x = !strcmp(s, "nan") ? NAN : !strcmp(s, "inf") ? INFINITY : !strcmp(s, "-inf") ? -INFINITY : 0;
            if (x == 0) return bad(d, "a float payload is not inf, -inf or nan");
            v = mr_value_new_float(x);
        } else if (json_is_array(seq)) {
            v = mr_value_new(MR_V_SEQ);
            size_t i;
            json_t *e;
            json_array_foreach(seq, i, e)
            {
                mr_value *item = NULL;
                if (!v) break;
                rc = dec_value(d, e, &item);
                if (rc == MR_OK && mr_value_seq_push(v, item) != MR_OK) rc = MR_ERR(d->err, MR_E_NOMEM, "out of memory");
                if (rc != MR_OK) break;
            }
        } else if (json_is_array(map)) {
            v = mr_value_new(MR_V_MAP);
            if (v) rc = dec_map(d, map, v);
        } else {
            return bad(d, "a value payload object is not seq, map or float");
        }
        break;
    }
    }
    if (rc == MR_OK && !v) rc = MR_ERR(d->err, MR_E_NOMEM, "out of memory");
    if (rc != MR_OK) {
        mr_value_free(v);
        return rc;
    }
    *out = v;
    return MR_OK;
}

static mr_status dec_value(dec *d, const json_t *node, mr_value **out)
{
    *out = NULL;
    size_t n = json_array_size(node);
    const json_t *line = json_array_get(node, 0), *col = json_array_get(node, 1), *text = json_array_get(node, 3);
    if (!json_is_array(node) || (n != 3 && n != 4) || !json_is_integer(line) || !json_is_integer(col) ||
        (n == 4 && !json_is_string(text)))
        return bad(d, "a value node is not [line, col, payload(, text)]");
    mr_value *v = NULL;
    mr_status rc = dec_payload(d, json_array_get(node, 2), &v);
    if (rc != MR_OK) return rc;
    v->line = (long)json_integer_value(line);
    v->col = (long)json_integer_value(col);
    if (n == 4 && v->kind != MR_V_STR && v->kind != MR_V_MAP && v->kind != MR_V_SEQ) {
        v->str = mr_strdup(json_string_value(text));
        if (!v->str) {
            mr_value_free(v);
            return MR_ERR(d->err, MR_E_NOMEM, "out of memory");
        }
    }
    *out = v;
    return MR_OK;
}

/* ---- shared helpers -------------------------------------------------------------- */

static mr_status dump_to(json_t *j, mr_buf *out, mr_error *err)
{
    char *t = j ? json_dumps(j, JSON_INDENT(1) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    mr_status rc = t ? mr_buf_puts(out, t) : MR_E_NOMEM;
    if (rc == MR_OK) rc = mr_buf_puts(out, "\n");
    free(t);
    if (rc != MR_OK) return MR_ERR(err, rc, "out of memory encoding a job file (or a string that is not UTF-8)");
    return MR_OK;
}

/* Parses a job or result file into *out; the status says why not. */
static mr_status load(const char *text, size_t len, const char *path, const char *format, json_t **out,
                      mr_error *err)
{
    *out = NULL;
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *j = json_loadb(text, len, 0, &je);
    if (mr_alloc_failures_here() != oom0) {
        json_decref(j);
        MR_ERR(err, MR_E_NOMEM, "out of memory reading %s", format);
        mr_error_at(err, path, 0, 0);
        return MR_E_NOMEM;
    }
    if (!j) {
        MR_ERR(err, MR_E_PARSE, "%s", je.text);
        mr_error_at(err, path, je.line, je.column);
        return MR_E_PARSE;
    }
    mr_status rc;
    const char *f = json_string_value(json_object_get(j, "format"));
    json_t *ver = json_object_get(j, "version");
    if (!json_is_object(j) || !f || strcmp(f, format) != 0) {
        rc = MR_ERR(err, MR_E_PARSE, "%s: not a %s file", path, format);
    } else if (!json_is_integer(ver) || json_integer_value(ver) != MR_JOB_VERSION) {
        rc = MR_ERR(err, MR_E_STATE, "%s: %s version %lld, this millrace reads version %d", path, format,
               json_is_integer(ver) ? (long long)json_integer_value(ver) : -1LL, MR_JOB_VERSION);
        mr_error_hint(err, "the runner and the worker must be the same millrace build");
    } else {
        *out = j;
        return MR_OK;
    }
    json_decref(j);
    return rc;
}

/* A required string field (copied). */
static mr_status get_str(dec *d, const json_t *o, const char *key, char **out)
{
    const char *s = json_string_value(json_object_get(o, key));
    if (!s) {
        char what[128];
        snprintf(what, sizeof(what), "field '%s' is missing or not a string", key);
        return bad(d, what);
    }
    *out = mr_strdup(s);
    return *out ? MR_OK : MR_ERR(d->err, MR_E_NOMEM, "out of memory");
}

static mr_status get_int(dec *d, const json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char what[128];
        snprintf(what, sizeof(what), "field '%s' is missing or not an integer in range", key);
        return bad(d, what);
    }
    *out = (int64_t)json_integer_value(v);
    return MR_OK;
}

static mr_status get_bool(dec *d, const json_t *o, const char *key, int *out)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_boolean(v)) {
        char what[128];
        snprintf(what, sizeof(what), "field '%s' is missing or not a boolean", key);
        return bad(d, what);
    }
    *out = json_is_true(v);
    return MR_OK;
}

static mr_status write_file(const char *path, mr_status (*enc)(const void *, mr_buf *, mr_error *), const void *x,
                            mr_error *err)
{
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = enc(x, &b, err);
    if (rc == MR_OK) rc = mr_fs_write_atomic(path, b.data, b.len, err);
    mr_buf_free(&b);
    return rc;
}

static mr_status read_file(const char *path, void *x, mr_status (*decf)(const char *, size_t, const char *, void *, mr_error *),
                           mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    mr_status rc = mr_fs_read_file(path, JOB_MAX_BYTES, &text, &len, err);
    if (rc == MR_OK) rc = decf(text, len, path, x, err);
    mr_free(text);
    return rc;
}

/* ---- job --------------------------------------------------------------------- */

void mr_job_init(mr_job *job) { memset(job, 0, sizeof(*job)); }

static void free_ios(mr_job_io *ios, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        mr_free(ios[k].name);
        mr_free(ios[k].path);
        mr_free(ios[k].id);
    }
    mr_free(ios);
}

void mr_job_deinit(mr_job *job)
{
    if (!job) return;
    mr_free(job->stage);
    mr_free(job->op);
    mr_free(job->key);
    mr_free(job->key_doc);
    mr_free(job->workspace);
    mr_free(job->spec_path);
    mr_free(job->result_path);
    mr_free(job->git_commit);
    mr_free(job->remote.url);
    mr_free(job->remote.endpoint);
    mr_free(job->remote.region);
    mr_free(job->cache_dir);
    mr_value_free(job->def);
    mr_value_free(job->params);
    free_ios(job->inputs, job->n_inputs);
    free_ios(job->outputs, job->n_outputs);
    for (size_t k = 0; k < job->n_locks; k++) mr_free(job->locks[k].path);
    mr_free(job->locks);
    memset(job, 0, sizeof(*job));
}

static json_t *enc_ios(const mr_job_io *ios, size_t n, int outputs)
{
    json_t *arr = json_array();
    for (size_t k = 0; arr && k < n; k++) {
        json_t *e = outputs ? json_pack("{s:s,s:s,s:b}", "name", ios[k].name, "path", ios[k].path, "metrics", ios[k].metrics)
                            : json_pack("{s:s,s:s,s:s}", "name", ios[k].name, "path", ios[k].path, "id",
                                        ios[k].id ? ios[k].id : "");
        if (json_array_append_new(arr, e) != 0) {
            json_decref(arr);
            return NULL;
        }
    }
    return arr;
}

mr_status mr_job_encode(const mr_job *job, mr_buf *out, mr_error *err)
{
    json_t *j = json_object();
    if (j) {
        json_object_set_new(j, "format", json_string(MR_JOB_FORMAT));
        json_object_set_new(j, "version", json_integer(MR_JOB_VERSION));
        json_object_set_new(j, "stage", json_string(job->stage));
        json_object_set_new(j, "op", json_string(job->op));
        json_object_set_new(j, "op_version", json_integer(job->op_version));
        json_object_set_new(j, "key", json_string(job->key));
        json_object_set_new(j, "key_doc", json_string(job->key_doc ? job->key_doc : ""));
        json_object_set_new(j, "run_id", json_integer((json_int_t)job->run_id));
        json_object_set_new(j, "smoke", json_boolean(job->smoke));
        json_object_set_new(j, "force", json_boolean(job->force));
        json_object_set_new(j, "threads", json_integer(job->threads));
        json_object_set_new(j, "mem_bytes", json_integer((json_int_t)job->mem_bytes));
        json_object_set_new(j, "workspace", json_string(job->workspace));
        json_object_set_new(j, "spec_path", json_string(job->spec_path ? job->spec_path : ""));
        json_object_set_new(j, "result", json_string(job->result_path));
        json_object_set_new(j, "git_commit", json_string(job->git_commit ? job->git_commit : ""));
        json_object_set_new(j, "inputs", enc_ios(job->inputs, job->n_inputs, 0));
        json_object_set_new(j, "outputs", enc_ios(job->outputs, job->n_outputs, 1));
        json_t *locks = json_array();
        for (size_t k = 0; locks && k < job->n_locks; k++)
            if (json_array_append_new(locks, json_pack("[s,s]", job->locks[k].exclusive ? "x" : "s", job->locks[k].path)) != 0) {
                json_decref(locks);
                locks = NULL;
            }
        json_object_set_new(j, "locks", locks);
        json_object_set_new(j, "def", job->def ? enc_value(job->def) : NULL);
        json_object_set_new(j, "params", job->params ? enc_value(job->params) : NULL);
        const mr_job_remote *rm = &job->remote;
        if (rm->url)
            json_object_set_new(j, "remote",
                                json_pack("{s:s,s:s?,s:s?,s:b,s:b}", "url", rm->url, "endpoint", rm->endpoint, "region",
                                          rm->region, "pull", rm->pull, "push", rm->push));
        if (job->cache_dir) json_object_set_new(j, "cache_dir", json_string(job->cache_dir));
        /* a NULL from any constructor (OOM, non-UTF-8 text) leaves a field out */
        if (json_object_size(j) != 21u + (rm->url != NULL) + (job->cache_dir != NULL)) {
            json_decref(j);
            j = NULL;
        }
    }
    mr_status rc = dump_to(j, out, err);
    json_decref(j);
    return rc;
}

static mr_status dec_ios(dec *d, const json_t *arr, int outputs, mr_job_io **out, size_t *n_out)
{
    if (!json_is_array(arr)) return bad(d, outputs ? "field 'outputs' is not a list" : "field 'inputs' is not a list");
    size_t n = json_array_size(arr);
    mr_job_io *ios = mr_calloc(n ? n : 1, sizeof(*ios));
    if (!ios) return MR_ERR(d->err, MR_E_NOMEM, "out of memory");
    *out = ios;
    mr_status rc = MR_OK;
    for (size_t k = 0; k < n && rc == MR_OK; k++) {
        const json_t *e = json_array_get(arr, k);
        *n_out = k + 1;
        rc = get_str(d, e, "name", &ios[k].name);
        if (rc == MR_OK) rc = get_str(d, e, "path", &ios[k].path);
        if (rc == MR_OK && outputs) rc = get_bool(d, e, "metrics", &ios[k].metrics);
        if (rc == MR_OK && !outputs) rc = get_str(d, e, "id", &ios[k].id);
    }
    return rc;
}

static mr_status job_decode(const char *text, size_t len, const char *path, void *x, mr_error *err)
{
    return mr_job_decode(text, len, path, x, err);
}

mr_status mr_job_decode(const char *text, size_t len, const char *path, mr_job *job, mr_error *err)
{
    dec d = {path ? path : "job file", err};
    mr_job_init(job);
    json_t *j;
    mr_status lrc = load(text, len, d.path, MR_JOB_FORMAT, &j, err);
    if (lrc != MR_OK) return lrc;
    int64_t v = 0;
    mr_status rc = get_str(&d, j, "stage", &job->stage);
    if (rc == MR_OK) rc = get_str(&d, j, "op", &job->op);
    if (rc == MR_OK) rc = get_int(&d, j, "op_version", 0, INT32_MAX, &v);
    job->op_version = (int)v;
    if (rc == MR_OK) rc = get_str(&d, j, "key", &job->key);
    if (rc == MR_OK) rc = get_str(&d, j, "key_doc", &job->key_doc);
    if (rc == MR_OK) rc = get_int(&d, j, "run_id", 0, INT64_MAX, &job->run_id);
    if (rc == MR_OK) rc = get_bool(&d, j, "smoke", &job->smoke);
    if (rc == MR_OK) rc = get_bool(&d, j, "force", &job->force);
    if (rc == MR_OK) rc = get_int(&d, j, "threads", 1, 1 << 20, &v);
    job->threads = (int)v;
    if (rc == MR_OK) rc = get_int(&d, j, "mem_bytes", 0, INT64_MAX, &v);
    job->mem_bytes = (uint64_t)v;
    if (rc == MR_OK) rc = get_str(&d, j, "workspace", &job->workspace);
    if (rc == MR_OK) rc = get_str(&d, j, "spec_path", &job->spec_path);
    if (rc == MR_OK) rc = get_str(&d, j, "result", &job->result_path);
    if (rc == MR_OK) rc = get_str(&d, j, "git_commit", &job->git_commit);
    if (rc == MR_OK) rc = dec_ios(&d, json_object_get(j, "inputs"), 0, &job->inputs, &job->n_inputs);
    if (rc == MR_OK) rc = dec_ios(&d, json_object_get(j, "outputs"), 1, &job->outputs, &job->n_outputs);
    const json_t *locks = json_object_get(j, "locks");
    if (rc == MR_OK && !json_is_array(locks)) rc = bad(&d, "field 'locks' is missing or not a list");
    if (rc == MR_OK && json_array_size(locks)) {
        job->locks = mr_calloc(json_array_size(locks), sizeof(*job->locks));
        if (!job->locks) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t k = 0; rc == MR_OK && k < json_array_size(locks); k++) {
        const json_t *e = json_array_get(locks, k);
        const char *mode = json_string_value(json_array_get(e, 0)), *s = json_string_value(json_array_get(e, 1));
        if (json_array_size(e) != 2 || !mode || !s || (strcmp(mode, "x") && strcmp(mode, "s")))
            rc = bad(&d, "a lock is not [\"x\" or \"s\", path]");
        else if (!(job->locks[job->n_locks].path = mr_strdup(s))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else job->locks[job->n_locks++].exclusive = mode[0] == 'x';
    }
    if (rc == MR_OK) rc = dec_value(&d, json_object_get(j, "def"), &job->def);
    if (rc == MR_OK) rc = dec_value(&d, json_object_get(j, "params"), &job->params);
    if (rc == MR_OK && (job->def->kind != MR_V_MAP || job->params->kind != MR_V_MAP))
        rc = bad(&d, "'def' and 'params' must be mappings");
    const json_t *rm = json_object_get(j, "remote");
    if (rc == MR_OK && rm) {
        if (!json_is_object(rm)) rc = bad(&d, "field 'remote' is not an object");
        if (rc == MR_OK) rc = get_str(&d, rm, "url", &job->remote.url);
        if (rc == MR_OK && json_is_string(json_object_get(rm, "endpoint")))
            rc = get_str(&d, rm, "endpoint", &job->remote.endpoint);
        if (rc == MR_OK && json_is_string(json_object_get(rm, "region"))) rc = get_str(&d, rm, "region", &job->remote.region);
        if (rc == MR_OK) rc = get_bool(&d, rm, "pull", &job->remote.pull);
        if (rc == MR_OK) rc = get_bool(&d, rm, "push", &job->remote.push);
    }
    if (rc == MR_OK && json_object_get(j, "cache_dir")) rc = get_str(&d, j, "cache_dir", &job->cache_dir);
    json_decref(j);
    return rc;
}

static mr_status job_encode(const void *x, mr_buf *out, mr_error *err) { return mr_job_encode(x, out, err); }

mr_status mr_job_write(const mr_job *job, const char *path, mr_error *err) { return write_file(path, job_encode, job, err); }

mr_status mr_job_read(const char *path, mr_job *job, mr_error *err)
{
    mr_job_init(job);
    return read_file(path, job, job_decode, err);
}

/* ---- result -------------------------------------------------------------------- */

void mr_job_result_init(mr_job_result *res)
{
    memset(res, 0, sizeof(*res));
    mr_error_init(&res->error);
}

void mr_job_result_deinit(mr_job_result *res)
{
    if (!res) return;
    for (size_t k = 0; k < res->n_outputs; k++) {
        mr_free(res->outputs[k].name);
        mr_free(res->outputs[k].id);
    }
    for (size_t k = 0; k < res->n_metrics; k++) mr_free(res->metrics[k].name);
    for (size_t k = 0; k < res->n_warnings; k++) mr_free(res->warnings[k]);
    mr_free(res->outputs);
    mr_free(res->metrics);
    mr_free(res->warnings);
    for (size_t k = 0; k < res->n_cache_entries; k++) mr_free(res->cache_entries[k]);
    mr_free(res->cache_entries);
    for (size_t k = 0; k < res->n_trials; k++) {
        mr_free(res->trials[k].key);
        mr_free(res->trials[k].status);
        mr_free(res->trials[k].record_json);
    }
    mr_free(res->trials);
    mr_job_result_init(res);
}

/* Grows *arr (elements of size sz) by one; the new element is zeroed. */
static void *push(void *arr_ptr, size_t *n, size_t sz)
{
    void **arr = arr_ptr;
    char *na = mr_realloc(*arr, (*n + 1) * sz);
    if (!na) return NULL;
    memset(na + *n * sz, 0, sz);
    *arr = na;
    return na + (*n)++ * sz;
}

mr_status mr_job_result_add_output(mr_job_result *res, const char *name, const char *id)
{
    char *n = mr_strdup(name), *i = mr_strdup(id);
    mr_job_output *o = n && i ? push(&res->outputs, &res->n_outputs, sizeof(*o)) : NULL;
    if (!o) {
        mr_free(n);
        mr_free(i);
        return MR_E_NOMEM;
    }
    o->name = n;
    o->id = i;
    return MR_OK;
}

mr_status mr_job_result_add_metric(mr_job_result *res, const char *name, int64_t step, double value)
{
    if (!name || !name[0] || !isfinite(value)) return MR_E_INVALID_ARG;
    char *n = mr_strdup(name);
    mr_job_metric *m = n ? push(&res->metrics, &res->n_metrics, sizeof(*m)) : NULL;
    if (!m) {
        mr_free(n);
        return MR_E_NOMEM;
    }
    m->name = n;
    m->step = step;
    m->value = value;
    return MR_OK;
}

mr_status mr_job_result_add_warning(mr_job_result *res, const char *text)
{
    char *t = mr_strdup(text);
    char **w = t ? push(&res->warnings, &res->n_warnings, sizeof(*w)) : NULL;
    if (!w) {
        mr_free(t);
        return MR_E_NOMEM;
    }
    *w = t;
    return MR_OK;
}

mr_status mr_job_result_add_cache_entry(mr_job_result *res, const char *key)
{
    for (size_t k = 0; k < res->n_cache_entries; k++)
        if (!strcmp(res->cache_entries[k], key)) return MR_OK;
    char *t = mr_strdup(key);
    char **e = t ? push(&res->cache_entries, &res->n_cache_entries, sizeof(*e)) : NULL;
    if (!e) {
        mr_free(t);
        return MR_E_NOMEM;
    }
    *e = t;
    return MR_OK;
}

mr_status mr_job_result_add_trial(mr_job_result *res, int trial, const char *key, const char *status, double value,
                                  const char *record_json)
{
    char *k = mr_strdup(key ? key : ""), *s = mr_strdup(status ? status : ""), *r = mr_strdup(record_json ? record_json : "{}");
    mr_job_trial *t = k && s && r ? push(&res->trials, &res->n_trials, sizeof(*t)) : NULL;
    if (!t) {
        mr_free(k);
        mr_free(s);
        mr_free(r);
        return MR_E_NOMEM;
    }
    t->trial = trial;
    t->key = k;
    t->status = s;
    t->value = value;
    t->record_json = r;
    return MR_OK;
}

const char *mr_job_result_output(const mr_job_result *res, const char *name)
{
    for (size_t k = 0; k < res->n_outputs; k++)
        if (!strcmp(res->outputs[k].name, name)) return res->outputs[k].id;
    return NULL;
}

static const char *status_name(mr_job_status s)
{
    switch (s) {
    case MR_JOB_EXECUTED: return "executed";
    case MR_JOB_CACHED: return "cached";
    case MR_JOB_FAILED: return "failed";
    }
    return "?";
}

/* A JSON string of text that may come from data: invalid UTF-8 is replaced. */
static json_t *jtext(const char *s)
{
    size_t n = strlen(s ? s : "");
    if (!s || mr_utf8_valid(s, n)) return json_stringn(s ? s : "", n);
    mr_buf b;
    mr_buf_init(&b);
    json_t *j = mr_buf_utf8_scrub(&b, s, n) == MR_OK ? json_stringn(b.data, b.len) : NULL;
    mr_buf_free(&b);
    return j;
}

static json_t *enc_error(const mr_error *e)
{
    return json_pack("{s:s,s:o,s:o,s:I,s:I,s:I,s:o,s:o,s:o,s:i}", "code", mr_status_name(e->code), "message", jtext(e->msg),
                     "file", jtext(e->file), "line", (json_int_t)e->line, "col", (json_int_t)e->col, "row", (json_int_t)e->row,
                     "key", jtext(e->key), "stage", jtext(e->stage), "hint", jtext(e->hint), "errno", e->sys_errno);
}

mr_status mr_job_result_encode(const mr_job_result *res, mr_buf *out, mr_error *err)
{
    json_t *j = json_object(), *outs = json_object(), *mets = json_array(), *warns = json_array();
    int ok = j && outs && mets && warns;
    for (size_t k = 0; ok && k < res->n_outputs; k++)
        ok = json_object_set_new(outs, res->outputs[k].name, json_string(res->outputs[k].id)) == 0;
    for (size_t k = 0; ok && k < res->n_metrics; k++)
        ok = json_array_append_new(mets, json_pack("{s:s,s:I,s:f}", "name", res->metrics[k].name, "step",
                                                   (json_int_t)res->metrics[k].step, "value", res->metrics[k].value)) == 0;
    for (size_t k = 0; ok && k < res->n_warnings; k++) ok = json_array_append_new(warns, jtext(res->warnings[k])) == 0;
    if (ok) {
        json_object_set_new(j, "format", json_string(MR_JOB_RESULT_FORMAT));
        json_object_set_new(j, "version", json_integer(MR_JOB_VERSION));
        json_object_set_new(j, "status", json_string(status_name(res->status)));
        json_object_set_new(j, "error", res->status == MR_JOB_FAILED ? enc_error(&res->error) : json_null());
        json_object_set_new(j, "outputs", outs);
        json_object_set_new(j, "metrics", mets);
        json_object_set_new(j, "warnings", warns);
        json_object_set_new(j, "bytes_read", json_integer((json_int_t)res->bytes_read));
        json_object_set_new(j, "bytes_written", json_integer((json_int_t)res->bytes_written));
        outs = mets = warns = NULL;
        size_t want = 9;
        if (res->max_rss_kb > 0) {
            json_object_set_new(j, "max_rss_kb", json_integer((json_int_t)res->max_rss_kb));
            want++;
        }
        if (res->n_cache_entries) {
            json_t *ce = json_array();
            for (size_t k = 0; ce && k < res->n_cache_entries; k++)
                if (json_array_append_new(ce, json_string(res->cache_entries[k])) != 0) {
                    json_decref(ce);
                    ce = NULL;
                }
            json_object_set_new(j, "cache_entries", ce);
            want++;
        }
        if (res->n_trials) {
            json_t *tr = json_array();
            for (size_t k = 0; tr && k < res->n_trials; k++) {
                const mr_job_trial *t = &res->trials[k];
                /* a NaN value (a failed trial) is written as null */
                json_t *e = json_pack("{s:i,s:s,s:s,s:o,s:o}", "trial", t->trial, "key", t->key, "status", t->status, "value",
                                      isfinite(t->value) ? json_real(t->value) : json_null(), "record", jtext(t->record_json));
                if (json_array_append_new(tr, e) != 0) {
                    json_decref(tr);
                    tr = NULL;
                }
            }
            json_object_set_new(j, "trials", tr);
            want++;
        }
        if (json_object_size(j) != want) ok = 0;
    }
    json_decref(outs);
    json_decref(mets);
    json_decref(warns);
    if (!ok) {
        json_decref(j);
        j = NULL;
    }
    mr_status rc = dump_to(j, out, err);
    json_decref(j);
    return rc;
}

static mr_status dec_error(dec *d, const json_t *e, mr_error *out)
{
    const char *code = json_string_value(json_object_get(e, "code"));
    const char *msg = json_string_value(json_object_get(e, "message"));
    if (!json_is_object(e) || !code || !msg) return bad(d, "a failed result has no error {code, message}");
    /* the runner prints the message as the stage's failure: an empty one
     * would report a failure that says nothing (found by fuzz_job) */
    if (!msg[0]) return bad(d, "a failed result's error has an empty 'message'");
    mr_status st = MR_E_FAILED;
#define MR__STATUS_BY_NAME(name, val, str) \
    if (!strcmp(code, #name)) st = MR_##name;
    MR_STATUS_MAP(MR__STATUS_BY_NAME)
#undef MR__STATUS_BY_NAME
    if (st == MR_OK) st = MR_E_FAILED;
    mr_error_init(out);
    MR_ERR(out, st, "%s", msg);
    const char *s;
    if ((s = json_string_value(json_object_get(e, "file"))) && s[0])
        mr_error_at(out, s, (long)json_integer_value(json_object_get(e, "line")),
                    (long)json_integer_value(json_object_get(e, "col")));
    else
        mr_error_at(out, NULL, (long)json_integer_value(json_object_get(e, "line")),
                    (long)json_integer_value(json_object_get(e, "col")));
    out->row = (long)json_integer_value(json_object_get(e, "row"));
    out->sys_errno = (int)json_integer_value(json_object_get(e, "errno"));
    if ((s = json_string_value(json_object_get(e, "key"))) && s[0]) mr_error_key(out, s);
    if ((s = json_string_value(json_object_get(e, "stage"))) && s[0]) mr_error_stage(out, s);
    if ((s = json_string_value(json_object_get(e, "hint"))) && s[0]) mr_error_hint(out, "%s", s);
    return MR_OK;
}

static mr_status result_decode(const char *text, size_t len, const char *path, void *x, mr_error *err)
{
    return mr_job_result_decode(text, len, path, x, err);
}

mr_status mr_job_result_decode(const char *text, size_t len, const char *path, mr_job_result *res, mr_error *err)
{
    dec d = {path ? path : "result file", err};
    mr_job_result_init(res);
    json_t *j;
    mr_status lrc = load(text, len, d.path, MR_JOB_RESULT_FORMAT, &j, err);
    if (lrc != MR_OK) return lrc;
    mr_status rc = MR_OK;
    const char *st = json_string_value(json_object_get(j, "status"));
    res->status = !st ? 0 : !strcmp(st, "executed") ? MR_JOB_EXECUTED : !strcmp(st, "cached") ? MR_JOB_CACHED
                                                      : !strcmp(st, "failed")                 ? MR_JOB_FAILED
                                                                                              : 0;
    if (!res->status) rc = bad(&d, "field 'status' is not executed, cached or failed");
    if (rc == MR_OK && res->status == MR_JOB_FAILED) rc = dec_error(&d, json_object_get(j, "error"), &res->error);
    const json_t *outs = json_object_get(j, "outputs"), *mets = json_object_get(j, "metrics"),
                 *warns = json_object_get(j, "warnings");
    if (rc == MR_OK && (!json_is_object(outs) || !json_is_array(mets) || !json_is_array(warns)))
        rc = bad(&d, "fields 'outputs', 'metrics' and 'warnings' must be an object and two lists");
    const char *name;
    json_t *v;
    json_object_foreach((json_t *)outs, name, v)
    {
        if (rc != MR_OK) break;
        if (!json_is_string(v)) rc = bad(&d, "an output id is not a string");
        else if (mr_job_result_add_output(res, name, json_string_value(v)) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    size_t k;
    json_array_foreach(mets, k, v)
    {
        if (rc != MR_OK) break;
        const char *mn = json_string_value(json_object_get(v, "name"));
        const json_t *mv = json_object_get(v, "value"), *ms = json_object_get(v, "step");
        if (!mn || !json_is_number(mv) || !json_is_integer(ms)) rc = bad(&d, "a metric is not {name, step, value}");
        else if (mr_job_result_add_metric(res, mn, (int64_t)json_integer_value(ms), json_number_value(mv)) == MR_E_NOMEM)
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    json_array_foreach(warns, k, v)
    {
        if (rc != MR_OK) break;
        if (!json_is_string(v)) rc = bad(&d, "a warning is not a string");
        else if (mr_job_result_add_warning(res, json_string_value(v)) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    const json_t *ce = json_object_get(j, "cache_entries"), *tr = json_object_get(j, "trials");
    if (rc == MR_OK && ((ce && !json_is_array(ce)) || (tr && !json_is_array(tr))))
        rc = bad(&d, "fields 'cache_entries' and 'trials' must be lists");
    json_array_foreach(ce, k, v)
    {
        if (rc != MR_OK) break;
        const char *key = json_string_value(v);
        mr_hash128 kh;
        if (!key || mr_hash_parse(key, &kh) != MR_OK) rc = bad(&d, "a cache entry is not a key of 32 hex digits");
        else if (mr_job_result_add_cache_entry(res, key) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    json_array_foreach(tr, k, v)
    {
        if (rc != MR_OK) break;
        const json_t *tv = json_object_get(v, "value"), *tn = json_object_get(v, "trial");
        const char *tk = json_string_value(json_object_get(v, "key")), *ts = json_string_value(json_object_get(v, "status")),
                   *trec = json_string_value(json_object_get(v, "record"));
        if (!json_is_integer(tn) || json_integer_value(tn) < 0 || json_integer_value(tn) > INT32_MAX || !tk || !ts || !trec ||
            !(json_is_number(tv) || json_is_null(tv)))
            rc = bad(&d, "a trial is not {trial, key, status, value, record}");
        else if (mr_job_result_add_trial(res, (int)json_integer_value(tn), tk, ts, json_is_null(tv) ? NAN : json_number_value(tv),
                                         trec) != MR_OK)
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) {
        res->bytes_read = (int64_t)json_integer_value(json_object_get(j, "bytes_read"));
        res->bytes_written = (int64_t)json_integer_value(json_object_get(j, "bytes_written"));
        const json_t *rss = json_object_get(j, "max_rss_kb");
        res->max_rss_kb = json_is_integer(rss) && json_integer_value(rss) > 0 ? (int64_t)json_integer_value(rss) : 0;
    }
    json_decref(j);
    return rc;
}

static mr_status result_encode(const void *x, mr_buf *out, mr_error *err) { return mr_job_result_encode(x, out, err); }

mr_status mr_job_result_write(const mr_job_result *res, const char *path, mr_error *err)
{
    return write_file(path, result_encode, res, err);
}

mr_status mr_job_result_read(const char *path, mr_job_result *res, mr_error *err)
{
    mr_job_result_init(res);
    return read_file(path, res, result_decode, err);
}
