/* The materialize_online op: the latest vector of every entity of a set of
 * feature views, written as an embedded online store (include/millrace/online.h,
 * docs/featurestore.md) that `millrace features get` and serving read. */
#include "millrace/online.h"
#include "millrace/op.h"
#include "ops_int.h"

#include <stdio.h>
#include <string.h>

static const mr_param_def mat_params[] = {
    {"keys", MR_PT_STRSEQ, 1, "the entity key column(s) the store is looked up by"},
    {"views", MR_PT_SEQ, 1, "feature views (names of top-level feature_views, or, as pit_join's: {name, source, timestamp, features, keys, created, ttl, prefix} each)"},
    {"service", MR_PT_STR, 0, "a top-level feature_services entry: its views, instead of views"},
    {"store", MR_PT_STR, 0,
     "redis://HOST:PORT[/NAMESPACE]: write the store to Redis (namespace default millrace:STAGE); default the embedded "
     "file out/STAGE/online.mrfs"},
    {NULL, 0, 0, NULL},
};

/* The Redis location of a store: value, with the namespace millrace:STAGE when it names none. Caller frees. */
static char *redis_location(const char *value, const char *stage)
{
    const char *slash = strchr(value + strlen("redis://"), '/');
    if (slash && slash[1]) return mr_strdup(value);
    return mr_asprintf("%.*s/millrace:%s", (int)(slash ? (size_t)(slash - value) : strlen(value)), value, stage);
}

static mr_status validate_mat(const mr_op_validate_ctx *vc, mr_error *err)
{
    const mr_value *st = mr_value_get(vc->def, "store");
    if (st && (st->kind != MR_V_STR || strncmp(st->str, "redis://", 8) || !st->str[8])) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "store must be redis://HOST:PORT[/NAMESPACE]");
        mr_error_at(err, NULL, st->line, st->col);
        mr_error_key(err, "store");
        mr_error_hint(err, "leave store out for the embedded store, out/<stage>/online.mrfs");
        return rc;
    }
    return mr__views_check(vc->def, err);
}

static mr_status run_mat(mr_op_ctx *ctx, mr_error *err)
{
    size_t n_keys = 0;
    const char **keys = mr__strings_of(ctx->def, "keys", &n_keys);
    mr__views vw;
    memset(&vw, 0, sizeof(vw));
    const mr_value *vst = mr_value_get(ctx->def, "store");
    char *loc = vst && vst->kind == MR_V_STR ? redis_location(vst->str, ctx->stage) : NULL;
    char *path = mr_path_join(ctx->outputs[0].path, loc ? "online.redis" : "online.mrfs");
    mr_status rc = keys && path && (loc || !vst) ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_fs_mkdirs(ctx->outputs[0].path, err);
    if (rc == MR_OK) rc = mr__views_load(ctx->def, keys, n_keys, 1, &vw, err);
    int threads = ctx->threads > 1 ? ctx->threads : 1;
    char gen[MR_HASH_HEX_LEN + 1];
    if (rc == MR_OK && !loc) rc = mr_online_build(path, keys, n_keys, vw.pv, vw.n, threads, err);
    if (rc == MR_OK && loc) {
        /* the table into Redis; the stage's output names where it is and which generation it wrote */
        rc = mr_online_build_redis(loc, keys, n_keys, vw.pv, vw.n, threads, gen, err);
        char *text = rc == MR_OK ? mr_asprintf("%s\ngeneration %s\n", loc, gen) : NULL;
        if (rc == MR_OK) rc = text ? mr_fs_write_atomic(path, text, strlen(text), err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(text);
    }
    mr_online *s = NULL;
    if (rc == MR_OK) rc = mr_online_open(loc ? loc : path, &s, err); /* what was written reads back */
    if (rc == MR_OK) {
        dprintf(ctx->log_fd, "materialize_online: %llu entities, %zu features from %zu views%s%s\n",
                (unsigned long long)mr_online_n_entities(s), mr_online_n_features(s), vw.n, loc ? " -> " : "",
                loc ? loc : "");
        mr_op_metric(ctx, "entities", 0, (double)mr_online_n_entities(s));
    }
    mr_online_close(s);
    mr__views_free(&vw);
    mr_free(keys);
    mr_free(path);
    mr_free(loc);
    return rc;
}

const mr_op mr_op_materialize_online = {
    .name = "materialize_online",
    .version = 2, /* 2: store: redis://... */
    .params = mat_params,
    .outputs = NULL,
    .run = run_mat,
    .validate = validate_mat,
    .inputs_of = mr__views_inputs,
};
