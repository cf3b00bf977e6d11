/* Internals shared by the built-in ops. */
#ifndef MILLRACE_OPS_INT_H
#define MILLRACE_OPS_INT_H
#include "millrace/op.h"

extern const mr_op mr_op_exec;
extern const mr_op mr_op_train;
extern const mr_op mr_op_package;
mr_status mr__exec_run(mr_op_ctx *ctx, mr_error *err);

#endif
