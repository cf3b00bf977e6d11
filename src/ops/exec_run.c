/* placeholder until the executor lands: filled in by the engine commit */
#include "ops_int.h"
mr_status mr__exec_run(mr_op_ctx *ctx, mr_error *err)
{
    (void)ctx;
    return MR_ERR(err, MR_E_INTERNAL, "exec ops are run by the engine");
}
