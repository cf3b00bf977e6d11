/* The exec op: any shell command, written as in dvc.yaml. Its deps and outs
 * are workspace paths; the engine (src/pipeline/executor.c) hashes deps,
 * runs the command in the workspace and publishes the declared outs. */
#include "millrace/op.h"
#include "ops_int.h"

static const mr_param_def exec_params[] = {
    {"cmd", MR_PT_STR | MR_PT_STRSEQ, 1, "shell command (or list of commands run in order), run in the workspace"},
    {"deps", MR_PT_STRSEQ, 0, "files or directories the command reads; hashed by content"},
    {"outs", MR_PT_STRSEQ, 0, "files or directories the command writes; stored as artifacts"},
    {"metrics", MR_PT_STRSEQ, 0, "JSON (or JSON lines) files the command writes; numeric leaves are recorded"},
    {"params", MR_PT_STRSEQ, 0, "param paths the command reads (besides those interpolated in cmd)"},
    {"env", MR_PT_MAP, 0, "extra environment variables (part of the cache key)"},
    {"always_changed", MR_PT_BOOL, 0, "never take this stage from the cache"},
    {NULL, 0, 0, NULL},
};

const mr_op mr_op_exec = {
    .name = "exec",
    .version = 1,
    .params = exec_params,
    .outputs = NULL,
    .run = mr__exec_run,
};

void mr_ops_register_builtin(void)
{
    mr_op_register(&mr_op_exec);
    mr_op_register(&mr_op_train);
    mr_op_register(&mr_op_tune);
    mr_op_register(&mr_op_transform);
    mr_op_register(&mr_op_split);
    mr_op_register(&mr_op_features);
    mr_op_register(&mr_op_ingest);
    mr_op_register(&mr_op_evaluate);
    mr_op_register(&mr_op_check);
    mr_op_register(&mr_op_report);
    mr_op_register(&mr_op_package);
}
