/* The report op: writes report.html (self-contained, charts as inline SVG)
 * and report.md from the evaluate / train / check / tune outputs it is
 * given and the run store's records of the stages that produced them. The
 * artifact holds only what those inputs determine (no run id, time, path or
 * timing: the same inputs give the same bytes). The layout lives in
 * src/report/run_report.c, shared with `millrace report RUN`. */
#include "millrace/op.h"
#include "millrace/runreport.h"
#include "millrace/runstore.h"
#include "ops_int.h"

#include <stdio.h>
#include <string.h>

static const mr_param_def report_params[] = {
    {"evaluate", MR_PT_STR | MR_PT_PATH, 0, "an evaluate stage's output: ${stages.EVAL}"},
    {"model", MR_PT_STR | MR_PT_PATH, 0, "the model (feature importance): ${stages.TRAIN} or a model file"},
    {"check", MR_PT_STR | MR_PT_PATH, 0, "a check stage's output: ${stages.CHECK}"},
    {"tune", MR_PT_STR | MR_PT_PATH, 0, "a tune stage's output: ${stages.TUNE} (metric by trial, importances, leaderboard)"},
    {"title", MR_PT_STR, 0, "report title (default: \"Model report\")"},
    {NULL, 0, 0, NULL},
};

/* ---- settings: what the definition says, checked without data ------------
 * validate (at load) and run both call report_settings. What the inputs
 * hold is read when the stage runs. */

static const char *const report_inputs[] = {"evaluate", "model", "check", "tune"};

typedef struct report_cfg {
    const char *in[4]; /* report_inputs, NULL when not given */
    const char *title; /* NULL = "Model report" */
} report_cfg;

static mr_status report_settings(const mr_value *def, report_cfg *c, mr_error *err)
{
    mr_status rc = MR_OK;
    memset(c, 0, sizeof(*c));
    for (size_t k = 0; k < 4 && rc == MR_OK; k++) {
        const mr_value *v = mr_value_get(def, report_inputs[k]);
        rc = mr__check_text(v, report_inputs[k], "a stage output (${stages.X}) or a path", 0, err);
        if (v && v->kind == MR_V_STR) c->in[k] = v->str;
    }
    if (rc == MR_OK && !c->in[0] && !c->in[1] && !c->in[2] && !c->in[3]) {
        /* every section would say it has no data: a report of nothing */
        rc = MR_ERR(err, MR_E_SCHEMA, "a report needs at least one input: evaluate, model, check or tune");
        mr_error_hint(err, "e.g. evaluate: ${stages.eval} and model: ${stages.train}");
    }
    /* The title heads the HTML page and the Markdown summary (# TITLE): one line. */
    const mr_value *t = mr_value_get(def, "title");
    if (rc == MR_OK && (rc = mr__check_text(t, "title", "one line of text", 1, err)) != MR_OK)
        mr_error_hint(err, "leave title out for \"Model report\"");
    c->title = rc == MR_OK && t && t->kind == MR_V_STR ? t->str : NULL;
    return rc;
}

static mr_status validate_report(const mr_op_validate_ctx *vc, mr_error *err)
{
    report_cfg c;
    return report_settings(vc->def, &c, err);
}

/* The stage whose output is the input read at path (inputs named
 * "stages.X.OUT"), written into buf; NULL for a plain file. */
static const char *stage_of(const mr_op_ctx *ctx, const char *path, char *buf, size_t cap)
{
    for (size_t k = 0; path && k < ctx->n_inputs; k++) {
        const char *name = ctx->inputs[k].name;
        if (!ctx->inputs[k].path || strcmp(ctx->inputs[k].path, path) || strncmp(name, "stages.", 7)) continue;
        const char *dot = strchr(name + 7, '.');
        size_t n = dot ? (size_t)(dot - name - 7) : strlen(name + 7);
        if (n == 0 || n >= cap) continue;
        memcpy(buf, name + 7, n);
        buf[n] = '\0';
        return buf;
    }
    return NULL;
}

static mr_status run_report(mr_op_ctx *ctx, mr_error *err)
{
    mr_runstore *rs = NULL;
    char *db = mr_asprintf("%s/.millrace/runs.db", ctx->workspace);
    char *html = mr_path_join(ctx->outputs[0].path, "report.html");
    char *md = mr_path_join(ctx->outputs[0].path, "report.md");
    char st_eval[256], st_model[256], st_check[256], st_tune[256];
    report_cfg c;
    mr_status rc = report_settings(ctx->def, &c, err);
    if (rc == MR_OK) rc = db && html && md ? mr_runstore_open(db, &rs, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        mr_run_report_inputs in = {c.title,
                                   c.in[0],
                                   c.in[1],
                                   c.in[2],
                                   c.in[3],
                                   stage_of(ctx, c.in[0], st_eval, sizeof(st_eval)),
                                   stage_of(ctx, c.in[1], st_model, sizeof(st_model)),
                                   stage_of(ctx, c.in[2], st_check, sizeof(st_check)),
                                   stage_of(ctx, c.in[3], st_tune, sizeof(st_tune)),
                                   1};
        rc = mr_run_report_write(rs, ctx->run_id, &in, html, md, err);
    }
    if (rc == MR_OK) dprintf(ctx->log_fd, "wrote report.html and report.md\n");
    mr_runstore_close(rs);
    mr_free(db);
    mr_free(html);
    mr_free(md);
    return rc;
}

/* Version 2: the report holds only what its inputs determine (no run id,
 * run status, times or timeline; the stages reported and their outcome),
 * the tune section draws all trials in one chart, legends sit below plots. */
const mr_op mr_op_report = {
    .name = "report",
    .version = 2,
    .params = report_params,
    .outputs = NULL,
    .run = run_report,
    .validate = validate_report,
};
