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
    {"views", MR_PT_SEQ, 1, "feature views, as pit_join's: {name, source, timestamp, features, keys, created, ttl, prefix}"},
    {NULL, 0, 0, NULL},
};

static mr_status validate_mat(const mr_op_validate_ctx *vc, mr_error *err) { return mr__views_check(vc->def, err); }

static mr_status run_mat(mr_op_ctx *ctx, mr_error *err)
{
    size_t n_keys = 0;
    const char **keys = mr__strings_of(ctx->def, "keys", &n_keys);
    mr__views vw;
    memset(&vw, 0, sizeof(vw));
    char *path = mr_path_join(ctx->outputs[0].path, "online.mrfs");
    mr_status rc = keys && path ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) rc = mr_fs_mkdirs(ctx->outputs[0].path, err);
    if (rc == MR_OK) rc = mr__views_load(ctx->def, keys, n_keys, &vw, err);
    if (rc == MR_OK) rc = mr_online_build(path, keys, n_keys, vw.pv, vw.n, ctx->threads > 1 ? ctx->threads : 1, err);
    mr_online *s = NULL;
    if (rc == MR_OK) rc = mr_online_open(path, &s, err); /* what was written reads back */
    if (rc == MR_OK) {
        dprintf(ctx->log_fd, "materialize_online: %llu entities, %zu features from %zu views\n",
                (unsigned long long)mr_online_n_entities(s), mr_online_n_features(s), vw.n);
        mr_op_metric(ctx, "entities", 0, (double)mr_online_n_entities(s));
    }
    mr_online_close(s);
    mr__views_free(&vw);
    mr_free(keys);
    mr_free(path);
    return rc;
}

const mr_op mr_op_materialize_online = {
    .name = "materialize_online",
    .version = 1,
    .params = mat_params,
    .outputs = NULL,
    .run = run_mat,
    .validate = validate_mat,
    .inputs_of = mr__views_inputs,
};
