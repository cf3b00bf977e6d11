/* millrace: the whole public API, one header per module, grouped by room
 * (docs/architecture.md). Including this is the same as including each of
 * them; any name not declared under include/millrace/ is private. The
 * conventions every header follows (status codes, mr_error, [in]/[out]
 * parameters, who frees what) are stated once in core.h; each header adds
 * its own ownership, status codes and thread safety.
 *
 * Example:
 *
 *   #include "millrace/millrace.h"
 *   printf("millrace %s\n", mr_version());
 *
 * Every header opens with an overview and an example like this one, which
 * tests/lint/header_examples.sh compiles: an example is the body of a
 * function whose parameters are the inputs named after "given", and it may
 * use `err`, an mr_error its caller initialised.
 */
#ifndef MILLRACE_H
#define MILLRACE_H
/* core */
#include "millrace/core.h"
#include "millrace/value.h"
#include "millrace/s3.h"
/* store */
#include "millrace/store.h"
/* data */
#include "millrace/table.h"
#include "millrace/csv.h"
#include "millrace/jsonl.h"
#include "millrace/parquet.h"
#include "millrace/dataset.h"
#include "millrace/io.h"
#include "millrace/expr.h"
#include "millrace/transform.h"
#include "millrace/image.h"
#include "millrace/loader.h"
#include "millrace/stats.h"
#include "millrace/webdataset.h"
/* ml */
#include "millrace/gbdt.h"
#include "millrace/linear.h"
#include "millrace/model.h"
#include "millrace/split.h"
#include "millrace/features.h"
#include "millrace/metrics.h"
#include "millrace/check.h"
#include "millrace/tune.h"
#include "millrace/bundle.h"
/* pipeline, ops, serve, report */
#include "millrace/op.h"
#include "millrace/spec.h"
#include "millrace/remote.h"
#include "millrace/runstore.h"
#include "millrace/registry.h"
#include "millrace/job.h"
#include "millrace/pipeline.h"
#include "millrace/serve.h"
#include "millrace/report.h"
#include "millrace/runreport.h"
#endif
