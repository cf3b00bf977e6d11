/* The built-in ops, registered once at start-up. */
#include "millrace/op.h"
#include "ops_int.h"

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
    mr_op_register(&mr_op_pit_join);
    mr_op_register(&mr_op_materialize_online);
    mr_op_register(&mr_op_feature_view);
}
