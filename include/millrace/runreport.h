/* Run reports: the self-contained HTML report (and Markdown summary) of one
 * run, built from the run store and the artifacts its evaluate, train and
 * check stages produced; and the side-by-side HTML comparison of two runs.
 * The report op, `millrace report RUN` and `millrace compare A B --html`
 * all call these, so a regenerated report is the one the pipeline wrote.
 *
 *   mr_workspace *ws;   // mr_workspace_open(...)
 *   int64_t run;
 *   mr_runstore_resolve_run(ws->rs, "latest", &run, &err);
 *   mr_run_report_regenerate(ws, run, "report.html", "report.md", &err);
 *
 * Sections (element ids): summary timeline training metrics curves
 * confusion importance slices errors residuals checks. A section whose data
 * the run lacks says so in one line instead of drawing an empty chart.
 * Status codes: MR_E_NOT_FOUND (unknown run), MR_E_PARSE (an unreadable
 * artifact), MR_E_IO, MR_E_NOMEM. Not thread-safe (one run store handle). */
#ifndef MILLRACE_RUNREPORT_H
#define MILLRACE_RUNREPORT_H

#include "millrace/pipeline.h"
#include "millrace/runstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Artifacts a report draws from; any may be NULL. */
typedef struct mr_run_report_inputs {
    const char *title;    /* NULL = "<workspace dir>: run N" */
    const char *evaluate; /* an evaluate output directory (metrics/curves/slices/errors JSON) */
    const char *model;    /* a model file or a train output directory (model.bin) */
    const char *check;    /* a check output directory (results.json) */
    const char *tune;     /* a tune output directory (trials.json, study.json); NULL = none */
} mr_run_report_inputs;

/* Writes the report of run_id (html_path; md_path may be NULL). The run
 * summary, timeline and training curves come from rs: a report written by
 * a stage of the running run sees the stages recorded so far. */
mr_status mr_run_report_write(mr_runstore *rs, int64_t run_id, const mr_run_report_inputs *in, const char *html_path,
                              const char *md_path, mr_error *err);
/* Regenerates the report of a past run: the outputs its evaluate, train and
 * check stages recorded (a failed check's published results included) are
 * checked out of the store into a scratch directory and read from there. */
mr_status mr_run_report_regenerate(mr_workspace *ws, int64_t run_id, const char *html_path, const char *md_path,
                                   mr_error *err);
/* Two runs side by side: summaries, the params table (changed rows
 * flagged), final metrics with deltas and a delta chart, and the ROC, PR,
 * calibration and gain curves of both runs overlaid where both have them. */
mr_status mr_run_compare_html(mr_workspace *ws, int64_t a, int64_t b, const char *html_path, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
