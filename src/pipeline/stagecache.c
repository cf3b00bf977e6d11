/* The stage cache as entry files, for cluster jobs (run --executor slurm).
 *
 * runs.db is a SQLite file in WAL mode: its readers need shared memory on
 * one host, and two hosts writing it over NFS corrupt it. So a job on a
 * cluster node never opens it: the runner mirrors the stage cache into a
 * directory of entry files before it submits (mr__cache_export), a job
 * looks up and writes entries there (mr__cache_get / mr__cache_put on a
 * workspace opened with a cache_dir), reports the keys it wrote in its
 * result, and the runner, the only writer of runs.db, records them
 * (mr__cache_import). One file per key, published atomically; a reader
 * checks that the file holds the key it asked for, so a renamed or
 * half-copied file is a miss, never another key's result. Format:
 * docs/formats.md ("Stage-cache entry files"). */
#include "pipeline_int.h"

#include <errno.h>
#include <string.h>

#include <jansson.h>

#define ENTRY_FORMAT "millrace-stage-entry"
#define ENTRY_VERSION 1
#define ENTRY_MAX_BYTES ((size_t)64 << 20)

/* DIR/KEY.json; a key that is not a plain name is hashed into one. */
static char *entry_path(const char *dir, const char *key)
{
    size_t n = strlen(key);
    int plain = n > 0 && n <= 128 && key[0] != '.';
    for (size_t k = 0; plain && k < n; k++) {
        char ch = key[k];
        plain = (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || ch == '_' || ch == '-' ||
                ch == '.';
    }
    if (plain) return mr_asprintf("%s/%s.json", dir, key);
    char hex[MR_HASH_HEX_LEN + 1];
    mr_hash_hex(mr_hash_bytes(key, n), hex);
    return mr_asprintf("%s/h-%s.json", dir, hex);
}

static mr_status dup_field(const json_t *o, const char *name, char **out, mr_error *err)
{
    if (!out) return MR_OK;
    const char *s = json_string_value(json_object_get(o, name));
    *out = s ? mr_strdup(s) : NULL;
    return s && !*out ? MR_ERR(err, MR_E_NOMEM, "out of memory") : MR_OK;
}

mr_status mr__cache_file_get(const char *dir, const char *key, char **outputs_json, char **metrics_json, char **key_doc,
                             char **stage, char **op, int64_t *run_id, mr_error *err)
{
    char **outs[5] = {outputs_json, metrics_json, key_doc, stage, op};
    for (int i = 0; i < 5; i++)
        if (outs[i]) *outs[i] = NULL;
    char *path = entry_path(dir, key), *text = NULL;
    size_t len = 0;
    if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_error re;
    mr_error_init(&re);
    mr_status rc = mr_fs_read_file(path, ENTRY_MAX_BYTES, &text, &len, &re);
    if (rc == MR_E_NOMEM) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    else if (rc != MR_OK) rc = MR_ERR(err, MR_E_NOT_FOUND, "no cache entry for key '%s'", key);
    json_t *j = NULL;
    if (rc == MR_OK) {
        rc = mr_json_parse(text, len, 0, &j, path, &re);
        if (rc == MR_E_NOMEM) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else if (rc != MR_OK) rc = MR_ERR(err, MR_E_NOT_FOUND, "no usable cache entry for key '%s': %s", key, re.msg);
    }
    if (rc == MR_OK) {
        const char *fmt = json_string_value(json_object_get(j, "format"));
        const char *k = json_string_value(json_object_get(j, "key"));
        const json_t *ver = json_object_get(j, "version");
        /* the file must hold the key asked for: a copy under another name is a miss */
        if (!fmt || strcmp(fmt, ENTRY_FORMAT) || !json_is_integer(ver) || json_integer_value(ver) != ENTRY_VERSION || !k ||
            strcmp(k, key) || !json_is_string(json_object_get(j, "outputs")) || !json_is_string(json_object_get(j, "stage")))
            rc = MR_ERR(err, MR_E_NOT_FOUND, "%s: not a stage-cache entry of version %d for key '%s'", path, ENTRY_VERSION, key);
    }
    const char *names[5] = {"outputs", "metrics", "key_doc", "stage", "op"};
    for (int i = 0; i < 5 && rc == MR_OK; i++) rc = dup_field(j, names[i], outs[i], err);
    if (rc == MR_OK && run_id) *run_id = (int64_t)json_integer_value(json_object_get(j, "run_id"));
    if (rc != MR_OK)
        for (int i = 0; i < 5; i++)
            if (outs[i]) {
                mr_free(*outs[i]);
                *outs[i] = NULL;
            }
    json_decref(j);
    mr_free(text);
    mr_free(path);
    return rc;
}

mr_status mr__cache_file_put(const char *dir, const char *key, const char *stage, const char *op, const char *key_doc,
                             const char *outputs_json, const char *metrics_json, int64_t run_id, mr_error *err)
{
    char *path = entry_path(dir, key);
    json_t *j = json_pack("{s:s,s:i,s:s,s:s,s:s?,s:s?,s:s,s:s?,s:I}", "format", ENTRY_FORMAT, "version", ENTRY_VERSION, "key",
                          key, "stage", stage, "op", op, "key_doc", key_doc, "outputs", outputs_json ? outputs_json : "{}",
                          "metrics", metrics_json, "run_id", (json_int_t)run_id);
    char *text = j ? json_dumps(j, JSON_SORT_KEYS | JSON_COMPACT) : NULL;
    mr_status rc = path && text ? mr_fs_mkdirs(dir, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_fs_write_atomic(path, text, strlen(text), err);
    free(text);
    json_decref(j);
    mr_free(path);
    return rc;
}

mr_status mr__cache_get(mr_workspace *ws, const char *key, char **outputs_json, char **metrics_json, char **key_doc,
                        mr_error *err)
{
    if (ws->rs) return mr_runstore_cache_get(ws->rs, key, outputs_json, metrics_json, key_doc, err);
    if (!ws->cache_dir) return MR_ERR(err, MR_E_STATE, "no stage cache in this workspace handle");
    return mr__cache_file_get(ws->cache_dir, key, outputs_json, metrics_json, key_doc, NULL, NULL, NULL, err);
}

mr_status mr__cache_put(mr_workspace *ws, const char *key, const char *stage, const char *op, const char *key_doc,
                        const char *outputs_json, const char *metrics_json, int64_t run_id, mr_error *err)
{
    if (ws->rs) return mr_runstore_cache_put(ws->rs, key, stage, op, key_doc, outputs_json, metrics_json, run_id, err);
    if (!ws->cache_dir) return MR_ERR(err, MR_E_STATE, "no stage cache in this workspace handle");
    return mr__cache_file_put(ws->cache_dir, key, stage, op, key_doc, outputs_json, metrics_json, run_id, err);
}

typedef struct export_ctx {
    const char *dir;
    size_t n_written;
} export_ctx;

static mr_status export_one(void *ctx, const char *key, const char *stage, const char *op, const char *key_doc,
                            const char *outputs_json, const char *metrics_json, int64_t run_id, mr_error *err)
{
    export_ctx *x = ctx;
    char *path = entry_path(x->dir, key);
    if (!path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    int have = mr_fs_exists(path);
    mr_free(path);
    if (have) return MR_OK;
    x->n_written++;
    return mr__cache_file_put(x->dir, key, stage, op, key_doc, outputs_json, metrics_json, run_id, err);
}

mr_status mr__cache_export(mr_workspace *ws, const char *dir, size_t *n_written, mr_error *err)
{
    export_ctx x = {dir, 0};
    mr_status rc = mr_fs_mkdirs(dir, err);
    if (rc == MR_OK) rc = mr_runstore_cache_each(ws->rs, export_one, &x, err);
    if (n_written) *n_written = x.n_written;
    return rc;
}

mr_status mr__cache_import(mr_workspace *ws, const char *dir, const char *key, int64_t run_id, mr_error *err)
{
    char *outs = NULL, *mets = NULL, *doc = NULL, *stage = NULL, *op = NULL;
    mr_status rc = mr__cache_file_get(dir, key, &outs, &mets, &doc, &stage, &op, NULL, err);
    if (rc == MR_OK) rc = mr_runstore_cache_put(ws->rs, key, stage, op, doc, outs, mets, run_id, err);
    mr_free(outs);
    mr_free(mets);
    mr_free(doc);
    mr_free(stage);
    mr_free(op);
    return rc;
}
