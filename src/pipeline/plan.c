/* Planning a stage: its declared outputs, its inputs (upstream artifacts by
 * reference, workspace files by content), and its cache key.
 *
 * The cache key is xxh3-128 over one canonical JSON document:
 *
 *   {"def":{...},"inputs":{"name":"id",...},"op":"exec","op_version":1,
 *    "params":{"a.b":value,...},"smoke":false}
 *
 * plus "csv_reader": N when a built-in op reads a CSV file (the reader's
 * rules are part of what its result depends on), and "git_commit" for an
 * op that records the workspace's commit in its output (package).
 *
 * "def" is the stage's interpolated definition without the keys that cannot
 * change a result (op, desc, resources, and register for an op whose output
 * the engine registers in the model registry). Canonical JSON sorts map keys
 * bytewise and prints numbers in one shortest round-trip form, so the order
 * of keys in millrace.yaml, its whitespace, comments and quoting style never
 * change a key, while any change of a value, an input's content, the op's
 * version or the smoke flag always does. The document itself is stored with
 * the cache entry, which is how `millrace status` explains what changed. */
#include "pipeline_int.h"
#include "millrace/csv.h"
#include "millrace/dataset.h"

#include <glob.h>
#include <stdlib.h>
#include <strings.h>
#include <string.h>
#include <sys/types.h>

void mr__plan_free(mr__plan *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n_outs; i++) {
        mr_free(p->outs[i].name);
        mr_free(p->outs[i].path);
    }
    for (size_t i = 0; i < p->n_ins; i++) {
        mr_free(p->ins[i].name);
        mr_free(p->ins[i].path);
    }
    mr_free(p->outs);
    mr_free(p->ins);
    mr_free(p->key_doc);
    mr_value_free(p->params);
    for (size_t k = 0; k < p->n_locks; k++) mr_free(p->locks[k].path);
    mr_free(p->locks);
    memset(p, 0, sizeof(*p));
}

static mr_status push_io(mr__io **arr, size_t *n, const char *name, const char *path, int from_stage, const char *id)
{
    mr__io *na = mr_realloc(*arr, (*n + 1) * sizeof(*na));
    if (!na) return MR_E_NOMEM;
    *arr = na;
    mr__io *io = &na[*n];
    memset(io, 0, sizeof(*io));
    io->name = mr_strdup(name);
    io->path = mr_strdup(path);
    io->from_stage = from_stage;
    if (id) snprintf(io->id, sizeof(io->id), "%s", id);
    if (!io->name || !io->path) {
        mr_free(io->name);
        mr_free(io->path);
        return MR_E_NOMEM;
    }
    (*n)++;
    return MR_OK;
}

mr_status mr__plan_outputs(const mr_dag *dag, size_t i, mr__plan *p, mr_error *err)
{
    const mr_spec *spec = mr__dag_spec(dag);
    const mr_stage_spec *s = &spec->stages[i];
    const mr__stage_paths *sp = mr__dag_paths(dag, i);
    if (s->op->flags & MR_OP_WORKSPACE_OUTPUTS) {
        for (size_t k = 0; k < sp->n_outs; k++)
            if (push_io(&p->outs, &p->n_outs, sp->outs[k], sp->outs[k], -1, NULL) != MR_OK)
                return MR_ERR(err, MR_E_NOMEM, "out of memory");
        p->n_metrics = sp->n_metrics;
        return MR_OK;
    }
    if (s->op->outputs_of) {
        const char *names[64];
        size_t n = s->op->outputs_of(s->def, names, 64);
        if (n > 64) return MR_ERR(err, MR_E_LIMIT, "stage '%s' declares more than 64 outputs", s->name);
        for (size_t k = 0; k < n; k++) {
            char *path = mr_asprintf("out/%s/%s", s->name, names[k]);
            mr_status rc = path ? push_io(&p->outs, &p->n_outs, names[k], path, -1, NULL) : MR_E_NOMEM;
            mr_free(path);
            if (rc != MR_OK) return MR_ERR(err, rc, "out of memory");
        }
        return MR_OK;
    }
    if (!s->op->outputs) {
        char *path = mr_asprintf("out/%s", s->name);
        mr_status rc = path ? push_io(&p->outs, &p->n_outs, "out", path, -1, NULL) : MR_E_NOMEM;
        mr_free(path);
        return rc == MR_OK ? MR_OK : MR_ERR(err, rc, "out of memory");
    }
    for (const char *const *o = s->op->outputs; *o; o++) {
        char *path = mr_asprintf("out/%s/%s", s->name, *o);
        mr_status rc = path ? push_io(&p->outs, &p->n_outs, *o, path, -1, NULL) : MR_E_NOMEM;
        mr_free(path);
        if (rc != MR_OK) return MR_ERR(err, rc, "out of memory");
    }
    return MR_OK;
}

mr_status mr__plan_inputs(const mr_dag *dag, size_t i, mr__plan *plans, mr_error *err)
{
    const mr_spec *spec = mr__dag_spec(dag);
    const mr_stage_spec *s = &spec->stages[i];
    const mr__stage_paths *sp = mr__dag_paths(dag, i);
    mr__plan *p = &plans[i];
    size_t n_up = 0;
    const size_t *up = mr_dag_upstream(dag, i, &n_up);
    /* Workspace deps: an upstream's output by id, otherwise hashed from disk. */
    for (size_t d = 0; d < sp->n_deps; d++) {
        const char *dep = sp->deps[d];
        const char *id = NULL;
        int from = -1;
        for (size_t u = 0; u < n_up && !id; u++)
            for (size_t o = 0; o < plans[up[u]].n_outs; o++)
                if (!strcmp(plans[up[u]].outs[o].path, dep)) {
                    id = plans[up[u]].outs[o].id;
                    from = (int)up[u];
                    break;
                }
        if (push_io(&p->ins, &p->n_ins, dep, dep, from, id) != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    /* ${stages.X} references: all of X's outputs; ${stages.X.O}: output O. */
    for (size_t r = 0; r < s->n_refs; r++) {
        ssize_t j = mr__dag_index(dag, s->refs[r].stage);
        if (j < 0) return MR_ERR(err, MR_E_NOT_FOUND, "unknown stage '%s'", s->refs[r].stage);
        const mr__plan *up_p = &plans[j];
        int matched = 0;
        /* ${stages.X.FILE.PATH}: a value read from X's outputs (value_ref
         * below); every output of X is then an input of this stage. */
        int value_ref = s->refs[r].output && strchr(s->refs[r].output, '.') != NULL;
        for (size_t o = 0; value_ref && o < up_p->n_outs; o++)
            if (!strcmp(up_p->outs[o].name, s->refs[r].output)) value_ref = 0;
        for (size_t o = 0; o < up_p->n_outs; o++) {
            const mr__io *out = &up_p->outs[o];
            if (!value_ref && s->refs[r].output && strcmp(out->name, s->refs[r].output) != 0) continue;
            matched = 1;
            char *name = mr_asprintf("stages.%s.%s", s->refs[r].stage, out->name);
            int dup = 0;
            for (size_t k = 0; name && k < p->n_ins; k++) dup |= !strcmp(p->ins[k].name, name);
            mr_status rc = !name ? MR_E_NOMEM : dup ? MR_OK : push_io(&p->ins, &p->n_ins, name, out->path, (int)j, out->id);
            mr_free(name);
            if (rc != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        if (!matched) {
            mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "stage '%s' refers to output '%s' of stage '%s', which has no such output",
                                  s->name, s->refs[r].output ? s->refs[r].output : "(any)", s->refs[r].stage);
            mr_error_at(err, spec->path, s->refs[r].line, s->refs[r].col);
            if (up_p->n_outs) {
                const char **names = mr_calloc(up_p->n_outs, sizeof(*names));
                for (size_t o = 0; names && o < up_p->n_outs; o++) names[o] = up_p->outs[o].name;
                const char *best = names && s->refs[r].output ? mr_closest(s->refs[r].output, names, up_p->n_outs) : NULL;
                if (best) mr_error_hint(err, "did you mean '${stages.%s.%s}'?", s->refs[r].stage, best);
                mr_free(names);
            } else {
                mr_error_hint(err, "stage '%s' declares no outputs", s->refs[r].stage);
            }
            return rc;
        }
    }
    return MR_OK;
}

/* A workspace input that is a glob pattern (an op's MR_PT_PATH param such as
 * a pattern with * ? or [): its id is xxh3-128 over "glob\n" then "path\tid\n" for
 * every match in glob(3) order (sorted; a pattern with "**" is matched as the
 * files ingest matches it, any number of folders deep), so adding, removing,
 * renaming or changing a matching file changes the id, as a directory's would. */
static mr_status hash_glob(mr_workspace *ws, mr__io *io, uint64_t *bytes_hashed, mr_error *err)
{
    glob_t g;
    memset(&g, 0, sizeof g);
    int r;
    char **deep = NULL; /* "**": the files ingest's matcher (glob(3) reads ** as *) */
    size_t n_deep = 0;
    if (strstr(io->path, "**")) {
        mr_error e;
        mr_error_init(&e);
        mr_status mrc = mr_files_match(io->path, &deep, &n_deep, &e);
        if (mrc == MR_E_NOMEM) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        r = mrc == MR_OK ? 0 : GLOB_NOMATCH;
        g.gl_pathc = n_deep;
        g.gl_pathv = deep;
    } else {
        r = glob(io->path, 0, NULL, &g);
    }
    if (r != 0) {
        if (r != GLOB_NOMATCH) globfree(&g);
        mr_status rc = MR_ERR(err, MR_E_NOT_FOUND, "no file matches the dependency pattern '%s'", io->path);
        mr_error_hint(err, "create a matching file, or fix the pattern");
        return rc;
    }
    mr_artifact *arts = mr_calloc(g.gl_pathc, sizeof(*arts));
    mr_buf b;
    mr_buf_init(&b);
    uint64_t n_bytes = 0;
    mr_status rc = arts ? mr_store_hash_paths(ws->store, ws->sc, (const char *const *)g.gl_pathv, g.gl_pathc, arts,
                                              &n_bytes, err)
                        : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_buf_puts(&b, "glob\n");
    for (size_t k = 0; rc == MR_OK && k < g.gl_pathc; k++) {
        char id[MR_ARTIFACT_ID_LEN];
        mr_artifact_id(&arts[k], id);
        rc = mr_buf_printf(&b, "%s\t%s\n", g.gl_pathv[k], id);
        if (rc != MR_OK) rc = MR_ERR(err, rc, "out of memory");
    }
    if (rc == MR_OK) {
        mr_hash_hex(mr_hash_bytes(b.data, b.len), io->id);
        if (bytes_hashed) *bytes_hashed += n_bytes;
    }
    mr_buf_free(&b);
    mr_free(arts);
    if (deep) mr_files_match_free(deep, n_deep);
    else globfree(&g);
    return rc;
}

mr_status mr__plan_hash_inputs(mr_workspace *ws, mr__plan *plans, const size_t *stages, size_t n,
                               uint64_t *bytes_hashed, mr_error *err)
{
    size_t total = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t d = 0; d < plans[stages[k]].n_ins; d++)
            if (plans[stages[k]].ins[d].from_stage < 0 && !plans[stages[k]].ins[d].id[0]) total++;
    if (bytes_hashed) *bytes_hashed = 0;
    if (!total) return MR_OK;
    const char **paths = mr_calloc(total, sizeof(*paths));
    mr__io **ios = mr_calloc(total, sizeof(*ios));
    mr_artifact *arts = mr_calloc(total, sizeof(*arts));
    mr_status rc = MR_OK;
    if (!paths || !ios || !arts) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    size_t m = 0;
    for (size_t k = 0; k < n; k++)
        for (size_t d = 0; d < plans[stages[k]].n_ins; d++) {
            mr__io *io = &plans[stages[k]].ins[d];
            if (io->from_stage >= 0 || io->id[0]) continue; /* known already */
            if (!strncmp(io->path, "s3://", 5)) {
                /* what the listing shows: every object's key, size and ETag;
                 * the op then reads exactly those versions (dataset.h) */
                rc = mr_source_s3_version(io->path, io->id, err);
                if (rc != MR_OK) goto done;
                continue;
            }
            if (!mr_fs_exists(io->path) && strpbrk(io->path, "*?[")) {
                rc = hash_glob(ws, io, bytes_hashed, err);
                if (rc != MR_OK) goto done;
                continue;
            }
            if (!mr_fs_exists(io->path)) {
                rc = MR_ERR(err, MR_E_NOT_FOUND, "dependency '%s' does not exist", io->path);
                mr_error_hint(err, "create it, or add the stage that produces it as an out");
                goto done;
            }
            ios[m] = io;
            paths[m++] = io->path;
        }
    uint64_t batch_bytes = 0;
    rc = m ? mr_store_hash_paths(ws->store, ws->sc, paths, m, arts, &batch_bytes, err) : MR_OK;
    if (rc != MR_OK) goto done;
    if (bytes_hashed) *bytes_hashed += batch_bytes;
    for (size_t k = 0; k < m; k++) mr_artifact_id(&arts[k], ios[k]->id);
done:
    mr_free(paths);
    mr_free(ios);
    mr_free(arts);
    return rc;
}

/* 1 if mr_table_read_file would read path as CSV: a .csv/.tsv/.txt file, a
 * glob of them, or a folder of data files (a directory that is not a
 * millrace dataset). */
int mr__reads_csv(const char *path)
{
    static const char *const ext[] = {".csv", ".tsv", ".txt"};
    size_t n = strlen(path);
    for (int k = 0; k < 3; k++)
        if (n > 4 && (!strcasecmp(path + n - 4, ext[k]) || (strpbrk(path, "*?[") && strstr(path, ext[k])))) return 1;
    if (!mr_fs_is_dir(path)) return 0;
    char *manifest = mr_path_join(path, "manifest.json");
    int dataset = manifest && mr_fs_exists(manifest);
    mr_free(manifest);
    return !dataset;
}

/* Flattened params this stage depends on: {"a.b": value}. */
static mr_status stage_params(const mr_spec *spec, const mr_stage_spec *s, mr_value **flat_out, mr_value **nested_out)
{
    mr_value *flat = mr_value_new(MR_V_MAP), *nested = mr_value_new(MR_V_MAP);
    if (!flat || !nested) goto oom;
    for (size_t k = 0; k < s->n_param_paths; k++) {
        const mr_value *v = mr_value_get_path(spec->params, s->param_paths[k]);
        mr_value *c1 = v ? mr_value_clone(v) : mr_value_new(MR_V_NULL);
        mr_value *c2 = v ? mr_value_clone(v) : mr_value_new(MR_V_NULL);
        /* map_set/set_path own the value even when they fail (NULL -> NOMEM). */
        if (mr_value_map_set(flat, s->param_paths[k], c1) != MR_OK) {
            mr_value_free(c2);
            goto oom;
        }
        if (mr_value_set_path(nested, s->param_paths[k], c2) != MR_OK) goto oom;
    }
    *flat_out = flat;
    *nested_out = nested;
    return MR_OK;
oom:
    mr_value_free(flat);
    mr_value_free(nested);
    return MR_E_NOMEM;
}

mr_status mr__plan_key(const mr_spec *spec, size_t i, int smoke, const char *git_commit, mr__plan *p, mr_error *err)
{
    const mr_stage_spec *s = &spec->stages[i];
    mr_value *doc = mr_value_new(MR_V_MAP), *def = mr_value_new(MR_V_MAP), *inputs = mr_value_new(MR_V_MAP);
    mr_value *flat = NULL, *nested = NULL;
    mr_buf b;
    mr_buf_init(&b);
    mr_status rc = MR_OK;
    if (!doc || !def || !inputs || stage_params(spec, s, &flat, &nested) != MR_OK) goto oom;
    for (size_t k = 0; k < s->def->n; k++) {
        const char *key = s->def->keys[k];
        /* how a stage runs, not what it computes: distributed training
         * gives the same model at any rank count */
        if (!strcmp(key, "op") || !strcmp(key, "desc") || !strcmp(key, "resources") || !strcmp(key, "distributed"))
            continue;
        if (s->op->registers && !strcmp(key, "register")) continue; /* where the output is registered, not what it is */
        if (mr_value_map_set(def, key, mr_value_clone(s->def->items[k])) != MR_OK) goto oom;
    }
    for (size_t k = 0; k < p->n_ins; k++) {
        MR_ASSERT(p->ins[k].id[0]);
        if (mr_value_map_set(inputs, p->ins[k].name, mr_value_new_str(p->ins[k].id)) != MR_OK) goto oom;
    }
    /* An op that records the workspace's commit in its output has it in
     * its key: the key describes the bytes. */
    if ((s->op->flags & MR_OP_GIT_COMMIT) &&
        mr_value_map_set(doc, "git_commit", mr_value_new_str(git_commit ? git_commit : "")) != MR_OK)
        goto oom;
    /* A built-in op that reads a CSV file reads it under the CSV reader's
     * rules: their version is part of what the result depends on. */
    if (!(s->op->flags & MR_OP_WORKSPACE_OUTPUTS)) {
        int csv = 0;
        for (size_t k = 0; k < p->n_ins && !csv; k++) csv = mr__reads_csv(p->ins[k].path);
        if (csv && mr_value_map_set(doc, "csv_reader", mr_value_new_int(MR_CSV_READER_VERSION)) != MR_OK) goto oom;
    }
    mr_value *tmp[6] = {mr_value_new_str(s->op->name), mr_value_new_int(s->op->version), mr_value_new_bool(smoke),
                        def, inputs, flat};
    def = inputs = flat = NULL;
    const char *names[6] = {"op", "op_version", "smoke", "def", "inputs", "params"};
    for (int k = 0; k < 6; k++) {
        if (mr_value_map_set(doc, names[k], tmp[k]) != MR_OK) { /* tmp[k] is consumed either way */
            for (int q = k + 1; q < 6; q++) mr_value_free(tmp[q]);
            goto oom;
        }
    }
    if (mr_value_to_json(doc, 1, &b) != MR_OK) goto oom;
    mr_hash_hex(mr_hash_bytes(b.data, b.len), p->key);
    mr_free(p->key_doc);
    mr_value_free(p->params);
    p->key_doc = b.data;
    p->params = nested;
    b.data = NULL;
    nested = NULL;
    goto done;
oom:
    rc = MR_ERR(err, MR_E_NOMEM, "out of memory computing the key of stage '%s'", s->name);
done:
    mr_value_free(doc);
    mr_value_free(def);
    mr_value_free(inputs);
    mr_value_free(flat);
    mr_value_free(nested);
    mr_buf_free(&b);
    return rc;
}

static int cmp_lock(const void *a, const void *b)
{
    return strcmp(((const mr_job_lock *)a)->path, ((const mr_job_lock *)b)->path);
}

static mr_status lock_add(mr__plan *p, const char *path, int exclusive)
{
    for (size_t k = 0; k < p->n_locks; k++)
        if (!strcmp(p->locks[k].path, path)) {
            p->locks[k].exclusive |= exclusive;
            return MR_OK;
        }
    mr_job_lock *nl = mr_realloc(p->locks, (p->n_locks + 1) * sizeof(*nl));
    if (!nl) return MR_E_NOMEM;
    p->locks = nl;
    if (!(p->locks[p->n_locks].path = mr_strdup(path))) return MR_E_NOMEM;
    p->locks[p->n_locks++].exclusive = exclusive;
    return MR_OK;
}

mr_status mr__plan_locks(const mr_dag *dag, size_t i, const mr__plan *plans, mr__plan *p, mr_error *err)
{
    const mr_stage_spec *s = &mr__dag_spec(dag)->stages[i];
    const mr__stage_paths *sp = mr__dag_paths(dag, i);
    size_t n_stages = mr_dag_n(dag);
    mr_status rc = MR_OK;
    for (size_t k = 0; k < p->n_locks; k++) mr_free(p->locks[k].path);
    p->n_locks = 0;
    for (size_t o = 0; o < p->n_outs && rc == MR_OK; o++) rc = lock_add(p, p->outs[o].path, 1);
    /* A built-in op reads its inputs from private checkouts, not the workspace. */
    for (size_t d = 0; (s->op->flags & MR_OP_WORKSPACE_OUTPUTS) && d < sp->n_deps && rc == MR_OK; d++)
        rc = lock_add(p, sp->deps[d], 0);
    size_t own = p->n_locks;
    for (size_t k = 0; k < own && rc == MR_OK; k++)
        for (size_t j = 0; j < n_stages && rc == MR_OK; j++)
            for (size_t o = 0; o < plans[j].n_outs && rc == MR_OK; o++) {
                const char *op = plans[j].outs[o].path;
                if (mr__path_within(op, p->locks[k].path) || mr__path_within(p->locks[k].path, op))
                    rc = lock_add(p, op, p->locks[k].exclusive);
            }
    if (rc != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (p->n_locks > 1) qsort(p->locks, p->n_locks, sizeof(*p->locks), cmp_lock);
    return MR_OK;
}

mr_status mr__plan_outputs_json(const mr__plan *p, mr_buf *out)
{
    mr_status rc = mr_buf_puts(out, "{");
    for (size_t k = 0; k < p->n_outs && rc == MR_OK; k++) {
        if (k) rc = mr_buf_puts(out, ",");
        if (rc == MR_OK) rc = mr_buf_json_str(out, p->outs[k].name);
        if (rc == MR_OK) rc = mr_buf_puts(out, ":");
        if (rc == MR_OK) rc = mr_buf_json_str(out, p->outs[k].id);
    }
    if (rc == MR_OK) rc = mr_buf_puts(out, "}");
    return rc;
}

#include <jansson.h>

int mr__plan_cache_lookup(mr_workspace *ws, mr__plan *p, char **metrics_json)
{
    char *outs = NULL, *mets = NULL;
    int hit = 0;
    if (metrics_json) *metrics_json = NULL;
    if (mr_runstore_cache_get(ws->rs, p->key, &outs, &mets, NULL, NULL) != MR_OK) return 0;
    json_t *o = json_loads(outs ? outs : "{}", 0, NULL);
    if (!o || !json_is_object(o)) goto done;
    hit = 1;
    for (size_t k = 0; k < p->n_outs && hit; k++) {
        const char *id = json_string_value(json_object_get(o, p->outs[k].name));
        mr_artifact a;
        if (!id || mr_artifact_parse(id, &a) != MR_OK || !mr_store_has(ws->store, &a)) {
            hit = 0;
            break;
        }
        snprintf(p->outs[k].id, sizeof(p->outs[k].id), "%s", id);
    }
    if (hit && metrics_json) {
        *metrics_json = mets;
        mets = NULL;
    }
    if (!hit)
        for (size_t k = 0; k < p->n_outs; k++) p->outs[k].id[0] = '\0';
done:
    json_decref(o);
    mr_free(outs);
    mr_free(mets);
    return hit;
}

int mr__plan_outputs_in_place(mr_workspace *ws, mr__plan *p)
{
    if (!p->n_outs) return 1;
    const char **paths = mr_calloc(p->n_outs, sizeof(*paths));
    mr_artifact *arts = mr_calloc(p->n_outs, sizeof(*arts));
    int ok = paths && arts;
    for (size_t k = 0; ok && k < p->n_outs; k++) {
        paths[k] = p->outs[k].path;
        if (!mr_fs_exists(paths[k])) ok = 0;
    }
    if (ok) {
        mr_error e;
        mr_error_init(&e);
        ok = mr_store_hash_paths(ws->store, ws->sc, paths, p->n_outs, arts, NULL, &e) == MR_OK;
        for (size_t k = 0; ok && k < p->n_outs; k++) {
            char id[MR_ARTIFACT_ID_LEN];
            mr_artifact_id(&arts[k], id);
            ok = !strcmp(id, p->outs[k].id);
        }
    }
    mr_free(paths);
    mr_free(arts);
    return ok;
}

/* The inputs of a stage that are outputs of stage X ("stages.X.NAME"), in
 * order; name_out gets NAME. Returns the index of the next one from k, or
 * n when there is none. */
static size_t next_output_of(const mr_job_io *ins, size_t n, size_t k, const char *stage, size_t stage_len,
                             const char **name_out)
{
    for (; k < n; k++) {
        const char *nm = ins[k].name;
        if (strncmp(nm, "stages.", 7) || strncmp(nm + 7, stage, stage_len) || nm[7 + stage_len] != '.') continue;
        *name_out = nm + 8 + stage_len;
        return k;
    }
    return n;
}

static mr_status value_ref(const char *ref, size_t len, const mr_job_io *ins, size_t n_ins, mr_value **out,
                           mr_error *err);

/* Replaces every ${stages.X} / ${stages.X.O} in s by the path(s) the
 * inputs give that output, and every ${stages.X.FILE.PATH} by the text of
 * that value. */
static mr_status resolve_str(const char *s, const mr_job_io *ins, size_t n_ins, mr_buf *out, mr_error *err)
{
    mr_status rc = MR_OK;
    const char *p = s;
    while (rc == MR_OK && *p) {
        const char *ref = strstr(p, "${stages.");
        if (!ref) {
            rc = mr_buf_puts(out, p);
            break;
        }
        if (ref > p && ref[-1] == '$') { /* $${ escape was already handled by the spec */
            rc = mr_buf_append(out, p, (size_t)(ref - p) + 2);
            p = ref + 2;
            continue;
        }
        rc = mr_buf_append(out, p, (size_t)(ref - p));
        const char *end = strchr(ref, '}');
        if (!end) return MR_ERR(err, MR_E_PARSE, "unterminated reference in '%s'", s);
        const char *name = ref + 9;
        const char *dot = memchr(name, '.', (size_t)(end - name));
        size_t stage_len = (size_t)((dot ? dot : end) - name);
        char *output = dot ? mr_strndup(dot + 1, (size_t)(end - dot - 1)) : NULL;
        mr_value *val = NULL;
        mr_status vr = value_ref(name, (size_t)(end - name), ins, n_ins, &val, err);
        if (vr == MR_OK && val) {
            rc = val->kind == MR_V_MAP || val->kind == MR_V_SEQ ? mr_value_to_json(val, 1, out) : mr_value_scalar_text(val, out);
            mr_value_free(val);
            mr_free(output);
            p = end + 1;
            continue;
        }
        if (vr != MR_OK) {
            rc = vr;
        } else {
            int first = 1;
            const char *oname;
            for (size_t k = next_output_of(ins, n_ins, 0, name, stage_len, &oname); rc == MR_OK && k < n_ins;
                 k = next_output_of(ins, n_ins, k + 1, name, stage_len, &oname)) {
                if (output && strcmp(oname, output) != 0) continue;
                if (!first) rc = mr_buf_puts(out, " ");
                if (rc == MR_OK) rc = mr_buf_puts(out, ins[k].path);
                first = 0;
            }
            if (rc == MR_OK && first)
                rc = MR_ERR(err, MR_E_NOT_FOUND, "'%.*s': no input of the stage is that output", (int)(end + 1 - ref), ref);
        }
        mr_free(output);
        p = end + 1;
    }
    if (rc == MR_OK && !out->data) rc = mr_buf_puts(out, "");
    return rc;
}

/* ${stages.X.FILE.PATH}: the value at PATH (dotted) of FILE.json in one of
 * X's output directories, e.g. ${stages.tune.best.learning_rate} reads
 * out/tune/best.json. *out gets a typed clone (caller frees), or NULL
 * (and MR_OK) when ref is not of that form: a path reference. */
static mr_status value_ref(const char *ref, size_t len, const mr_job_io *ins, size_t n_ins, mr_value **out,
                           mr_error *err)
{
    mr_status rc = MR_OK;
    char *whole = mr_strndup(ref, len), *path = NULL;
    mr_value *doc = NULL;
    *out = NULL;
    if (!whole) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char *dot1 = strchr(whole, '.');
    char *dot2 = dot1 ? strchr(dot1 + 1, '.') : NULL;
    if (!dot2) goto done;
    size_t stage_len = (size_t)(dot1 - whole);
    const char *oname;
    for (size_t k = next_output_of(ins, n_ins, 0, whole, stage_len, &oname); k < n_ins;
         k = next_output_of(ins, n_ins, k + 1, whole, stage_len, &oname))
        if (!strcmp(oname, dot1 + 1)) goto done; /* an output name (with dots): a path reference */
    *dot1 = *dot2 = '\0';
    for (size_t k = next_output_of(ins, n_ins, 0, whole, stage_len, &oname); k < n_ins && !path;
         k = next_output_of(ins, n_ins, k + 1, whole, stage_len, &oname)) {
        char *cand = mr_asprintf("%s/%s.json", ins[k].path, dot1 + 1);
        if (cand && mr_fs_exists(cand)) path = cand;
        else mr_free(cand);
    }
    if (!path) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "${stages.%.*s}: stage '%s' wrote no %s.json", (int)len, ref, whole, dot1 + 1);
        goto done;
    }
    char *text = NULL;
    size_t tlen = 0;
    rc = mr_fs_read_file(path, (size_t)64 << 20, &text, &tlen, err);
    if (rc == MR_OK) rc = mr_yaml_parse(text, tlen, path, &doc, err); /* JSON is YAML */
    mr_free(text);
    if (rc != MR_OK) goto done;
    const mr_value *v = mr_value_get_path(doc, dot2 + 1);
    if (!v) {
        rc = MR_ERR(err, MR_E_NOT_FOUND, "${stages.%.*s}: %s has no '%s'", (int)len, ref, path, dot2 + 1);
        goto done;
    }
    *out = mr_value_clone(v);
    rc = *out ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
done:
    mr_value_free(doc);
    mr_free(path);
    mr_free(whole);
    return rc;
}

static mr_status resolve_tree(mr_value *v, const mr_job_io *ins, size_t n_ins, mr_error *err)
{
    if (v->kind == MR_V_STR && strstr(v->str, "${stages.")) {
        /* Exactly one value reference: the node takes the value's type. */
        size_t n = strlen(v->str);
        if (!strncmp(v->str, "${stages.", 9) && v->str[n - 1] == '}' && !memchr(v->str + 9, '}', n - 10)) {
            mr_value *val = NULL;
            mr_status rc = value_ref(v->str + 9, n - 10, ins, n_ins, &val, err);
            if (rc != MR_OK) return rc;
            if (val) {
                char *old_str = v->str;
                mr_value tmp = *v;
                *v = *val;
                v->line = tmp.line;
                v->col = tmp.col;
                mr_free(val); /* the shell only: its contents moved into v */
                mr_free(old_str);
                return MR_OK;
            }
        }
        mr_buf b;
        mr_buf_init(&b);
        mr_status rc = resolve_str(v->str, ins, n_ins, &b, err);
        if (rc != MR_OK) {
            mr_buf_free(&b);
            if (v->line) mr_error_at(err, NULL, v->line, v->col);
            return rc;
        }
        mr_free(v->str);
        v->str = b.data;
        return MR_OK;
    }
    if (v->kind == MR_V_MAP || v->kind == MR_V_SEQ)
        for (size_t k = 0; k < v->n; k++) {
            mr_status rc = resolve_tree(v->items[k], ins, n_ins, err);
            if (rc != MR_OK) return rc;
        }
    return MR_OK;
}

mr_status mr__resolve_refs(mr_value *def, const mr_job_io *ins, size_t n_ins, mr_error *err)
{
    return resolve_tree(def, ins, n_ins, err);
}
