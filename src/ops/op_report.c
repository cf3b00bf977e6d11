/* The report op: writes report.html (self-contained, charts as inline SVG)
 * and report.md for the running run, from the run store (summary, timeline,
 * training curves) and the evaluate / train / check outputs it is given.
 * The layout lives in src/report/run_report.c, shared with `millrace report RUN`. */
#include "millrace/op.h"
#include "millrace/runreport.h"
#include "millrace/runstore.h"
#include "ops_int.h"

#include <stdio.h>

static const mr_param_def report_params[] = {
    {"evaluate", MR_PT_STR | MR_PT_PATH, 0, "an evaluate stage's output: ${stages.EVAL}"},
    {"model", MR_PT_STR | MR_PT_PATH, 0, "the model (feature importance): ${stages.TRAIN} or a model file"},
    {"check", MR_PT_STR | MR_PT_PATH, 0, "a check stage's output: ${stages.CHECK}"},
    {"tune", MR_PT_STR | MR_PT_PATH, 0, "a tune stage's output: ${stages.TUNE} (metric by trial, importances, leaderboard)"},
    {"title", MR_PT_STR, 0, "report title (default: workspace directory and run id)"},
    {NULL, 0, 0, NULL},
};

static mr_status run_report(mr_op_ctx *ctx, mr_error *err)
{
    mr_runstore *rs = NULL;
    char *db = mr_asprintf("%s/.millrace/runs.db", ctx->workspace);
    char *html = mr_path_join(ctx->outputs[0].path, "report.html");
    char *md = mr_path_join(ctx->outputs[0].path, "report.md");
    mr_status rc = db && html && md ? mr_runstore_open(db, &rs, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        mr_run_report_inputs in = {mr__opt_str(ctx->def, "title", NULL), mr__opt_str(ctx->def, "evaluate", NULL),
                                   mr__opt_str(ctx->def, "model", NULL), mr__opt_str(ctx->def, "check", NULL),
                                   mr__opt_str(ctx->def, "tune", NULL)};
        rc = mr_run_report_write(rs, ctx->run_id, &in, html, md, err);
    }
    if (rc == MR_OK) dprintf(ctx->log_fd, "wrote report.html and report.md for run %lld\n", (long long)ctx->run_id);
    mr_runstore_close(rs);
    mr_free(db);
    mr_free(html);
    mr_free(md);
    return rc;
}

const mr_op mr_op_report = {
    .name = "report",
    .version = 1,
    .params = report_params,
    .outputs = NULL,
    .run = run_report,
};
