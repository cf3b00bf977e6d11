/* millrace: the whole public API. */
#ifndef MILLRACE_H
#define MILLRACE_H
#include "millrace/core.h"
#include "millrace/csv.h"
#include "millrace/expr.h"
#include "millrace/gbdt.h"
#include "millrace/io.h"
#include "millrace/linear.h"
#include "millrace/model.h"
#include "millrace/features.h"
#include "millrace/jsonl.h"
#include "millrace/parquet.h"
#include "millrace/op.h"
#include "millrace/pipeline.h"
#include "millrace/runstore.h"
#include "millrace/spec.h"
#include "millrace/split.h"
#include "millrace/store.h"
#include "millrace/table.h"
#include "millrace/transform.h"
#include "millrace/value.h"
#define MILLRACE_VERSION "0.1.0"
#endif
