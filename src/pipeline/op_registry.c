/* The op registry: a small fixed table filled at start-up. */
#include "millrace/op.h"

#include <string.h>

#define MAX_OPS 64

static const mr_op *ops[MAX_OPS];
static const char *op_names[MAX_OPS + 1];
static size_t n_ops;

const mr_param_def mr_stage_common_keys[] = {
    {"op", MR_PT_STR, 1, "the stage's op (exec, ingest, train, ...)"},
    {"desc", MR_PT_STR, 0, "a one-line description"},
    {"resources", MR_PT_MAP, 0, "{cpus: N, mem: 2G}: cores and memory the stage may use"},
    {NULL, 0, 0, NULL},
};

mr_status mr_op_register(const mr_op *op)
{
    if (mr_op_find(op->name)) return MR_OK;
    if (n_ops >= MAX_OPS) return MR_E_LIMIT;
    ops[n_ops] = op;
    op_names[n_ops] = op->name;
    n_ops++;
    op_names[n_ops] = NULL;
    return MR_OK;
}

const mr_op *mr_op_find(const char *name)
{
    if (!name) return NULL;
    for (size_t i = 0; i < n_ops; i++)
        if (!strcmp(ops[i]->name, name)) return ops[i];
    return NULL;
}

const char *const *mr_op_names(size_t *n_out)
{
    if (n_out) *n_out = n_ops;
    return op_names;
}

const mr_param_def *mr_op_param_find(const mr_op *op, const char *key)
{
    for (const mr_param_def *p = mr_stage_common_keys; p->name; p++)
        if (!strcmp(p->name, key)) return p;
    for (const mr_param_def *p = op->params; p && p->name; p++)
        if (!strcmp(p->name, key)) return p;
    return NULL;
}

int mr_op_value_deferred(const mr_value *v)
{
    return v && v->kind == MR_V_STR && v->str && strstr(v->str, "${stages.") != NULL;
}
