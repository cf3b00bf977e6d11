/* millrace.lock: what the workspace's last runs produced, per stage: op,
 * op version, key, params, input and output artifact ids. Users commit it;
 * gc keeps what it references. Written atomically under a file lock. */
#include "pipeline_int.h"

#include <stdio.h>
#include <string.h>

#include <jansson.h>

static const char lock_header[] = "# millrace.lock: written by `millrace run`; commit it with millrace.yaml.\n";

mr_status mr__lock_read(const mr_workspace *ws, mr_value **out, mr_error *err)
{
    char *text = NULL;
    size_t len = 0;
    if (!mr_fs_exists(ws->lock_path)) {
        *out = mr_value_new(MR_V_MAP);
        return *out ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_status rc = mr_fs_read_file(ws->lock_path, (size_t)64 << 20, &text, &len, err);
    if (rc != MR_OK) return rc;
    mr_value *v = NULL;
    rc = mr_yaml_parse(text, len, ws->lock_path, &v, err);
    mr_free(text);
    if (rc != MR_OK) return rc;
    if (!v || v->kind != MR_V_MAP) {
        mr_value_free(v);
        v = mr_value_new(MR_V_MAP);
        if (!v) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    *out = v;
    return MR_OK;
}

const char *mr__lock_stage_key(const mr_value *lock, const char *stage)
{
    const mr_value *stages = mr_value_get(lock, "stages");
    const mr_value *s = mr_value_get(stages, stage);
    const mr_value *k = mr_value_get(s, "key");
    return k && k->kind == MR_V_STR ? k->str : NULL;
}

static mr_value *io_map(const mr__io *ios, size_t n)
{
    mr_value *m = mr_value_new(MR_V_MAP);
    for (size_t k = 0; m && k < n; k++) {
        /* map_set owns the value even when it fails (NULL -> NOMEM). */
        if (mr_value_map_set(m, ios[k].name, mr_value_new_str(ios[k].id)) != MR_OK) {
            mr_value_free(m);
            return NULL;
        }
    }
    return m;
}

static mr_value *stage_entry(const mr_stage_spec *s, const mr__plan *p)
{
    /* Out of memory reading the key document is NULL (as for every other
     * allocation here), never an entry with its params left out. */
    uint64_t oom0 = mr_alloc_failures_here();
    json_t *doc = NULL;
    const char *kd = p->key_doc ? p->key_doc : "{}";
    if (mr_json_parse(kd, strlen(kd), 0, &doc, "the key document", NULL) == MR_E_NOMEM) return NULL;
    json_t *jparams = json_object_get(doc, "params");
    mr_value *params = jparams ? mr_value_from_jansson(jparams) : NULL;
    json_decref(doc);
    if (mr_alloc_failures_here() != oom0) { /* the conversion ran out of memory */
        mr_value_free(params);
        return NULL;
    }
    mr_value *e = mr_value_new(MR_V_MAP);
    mr_value *items[6] = {mr_value_new_str(s->op->name), mr_value_new_int(s->op->version), mr_value_new_str(p->key),
                          params ? params : mr_value_new(MR_V_MAP), io_map(p->ins, p->n_ins), io_map(p->outs, p->n_outs)};
    const char *names[6] = {"op", "op_version", "key", "params", "inputs", "outputs"};
    for (int k = 0; k < 6; k++) {
        if (!e) {
            for (int q = k; q < 6; q++) mr_value_free(items[q]);
            return NULL;
        }
        if (mr_value_map_set(e, names[k], items[k]) != MR_OK) { /* items[k] is consumed either way */
            for (int q = k + 1; q < 6; q++) mr_value_free(items[q]);
            mr_value_free(e);
            return NULL;
        }
    }
    return e;
}

mr_status mr__lock_update(mr_workspace *ws, const mr_spec *spec, const mr__plan *plans, const int *done, mr_error *err)
{
    mr_flock lk;
    char *lock_lock = mr_path_join(ws->dot, "locks/millrace.lock.lock");
    mr_value *old = NULL, *doc = NULL, *stages = NULL;
    mr_buf b;
    mr_buf_init(&b);
    if (!lock_lock) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr_flock_acquire(&lk, lock_lock, MR_LOCK_EXCLUSIVE, 1, 0, err);
    mr_free(lock_lock);
    if (rc != MR_OK) return rc;
    rc = mr__lock_read(ws, &old, err);
    if (rc != MR_OK) goto done;
    doc = mr_value_new(MR_V_MAP);
    stages = mr_value_new(MR_V_MAP);
    if (!doc || !stages || mr_value_map_set(doc, "schema", mr_value_new_int(1)) != MR_OK) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    const mr_value *old_stages = mr_value_get(old, "stages");
    for (size_t i = 0; i < spec->n_stages && rc == MR_OK; i++) {
        mr_value *e = NULL;
        if (done[i]) {
            e = stage_entry(&spec->stages[i], &plans[i]);
        } else {
            const mr_value *prev = mr_value_get(old_stages, spec->stages[i].name);
            if (!prev) continue;
            e = mr_value_clone(prev);
        }
        if (mr_value_map_set(stages, spec->stages[i].name, e) != MR_OK) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc != MR_OK) goto done;
    rc = mr_value_map_set(doc, "stages", stages);
    stages = NULL; /* consumed either way */
    if (rc != MR_OK) {
        rc = MR_ERR(err, rc, "out of memory");
        goto done;
    }
    if (mr_buf_puts(&b, lock_header) != MR_OK || mr_yaml_emit(doc, &b) != MR_OK) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    {
        /* An unchanged lock is not rewritten: no fsyncs on a no-op run, and
         * its mtime keeps saying when the results last changed. */
        char *cur = NULL;
        size_t cur_len = 0;
        if (mr_fs_read_file(ws->lock_path, (size_t)64 << 20, &cur, &cur_len, NULL) == MR_OK && cur_len == b.len &&
            !memcmp(cur, b.data, b.len)) {
            mr_free(cur);
            goto done;
        }
        mr_free(cur);
    }
    rc = mr_fs_write_atomic(ws->lock_path, b.data, b.len, err);
done:
    mr_flock_release(&lk);
    mr_value_free(old);
    mr_value_free(doc);
    mr_value_free(stages);
    mr_buf_free(&b);
    return rc;
}

void mr__git_info(const char *root, char *commit, size_t commit_len, int *dirty)
{
    commit[0] = '\0';
    *dirty = 0;
    char *cmd = mr_asprintf("git -C '%s' rev-parse HEAD 2>/dev/null", root);
    if (!cmd || strchr(root, '\'')) {
        mr_free(cmd);
        return;
    }
    FILE *f = popen(cmd, "r");
    mr_free(cmd);
    if (!f) return;
    if (fgets(commit, (int)commit_len, f)) commit[strcspn(commit, "\r\n")] = '\0';
    else commit[0] = '\0';
    pclose(f);
    if (!commit[0] || strlen(commit) != 40) {
        commit[0] = '\0';
        return;
    }
    /* millrace.lock is rewritten by the runs themselves: it does not make
     * the code a run ran "dirty". */
    cmd = mr_asprintf("git -C '%s' status --porcelain --untracked-files=no -- . ':(exclude)millrace.lock' 2>/dev/null", root);
    if (!cmd) return;
    f = popen(cmd, "r");
    mr_free(cmd);
    if (!f) return;
    char line[16];
    *dirty = fgets(line, sizeof(line), f) != NULL;
    pclose(f);
}

void mr__git_describe(const char *root, char *out, size_t out_len)
{
    char commit[64];
    int dirty = 0;
    mr__git_info(root, commit, sizeof(commit), &dirty);
    snprintf(out, out_len, "%s%s", commit, commit[0] && dirty ? "-dirty" : "");
}
