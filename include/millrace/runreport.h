/* Run reports: the self-contained HTML report (and Markdown summary) of one
 * run, built from the run store and the artifacts its evaluate, train,
 * check and tune stages produced; and the side-by-side HTML comparison of
 * two or more runs. The report op, `millrace report RUN` and
 * `millrace compare A B ... --html` all call these.
 *
 * Example (given mr_workspace *ws):
 *
 *   int64_t run;
 *   if (mr_runstore_resolve_run(ws->rs, "latest", &run, &err) != MR_OK ||
 *       mr_run_report_regenerate(ws, run, "report.html", "report.md", &err) != MR_OK)
 *       mr_log_error(&err);
 *
 * Two kinds of report share one layout (docs/report.md):
 * - the report op's artifact (inputs.artifact = 1) holds only what its
 *   inputs determine: the same inputs give the same bytes, so it states the
 *   stages it reports on (and their outcome), never a run id, a time, a
 *   path or a timing, and its timeline section says where the timeline is;
 * - a regenerated report (`millrace report RUN`) adds the run: its id,
 *   name, tags, final status, command, commit, and the stage timeline.
 *
 * Sections (element ids): summary timeline training metrics curves
 * confusion importance slices errors residuals checks tuning. A section
 * whose data the run lacks says so in one line instead of drawing an empty
 * chart.
 *
 * Ownership: everything is borrowed for the call (the run store, the
 * workspace, the inputs); the reports are files written atomically.
 * Status codes: MR_E_NOT_FOUND (unknown run), MR_E_PARSE (an unreadable
 * artifact), MR_E_INVALID_ARG (fewer than two runs to compare), MR_E_IO,
 * MR_E_NOMEM, and the store's checkout errors. Not thread-safe (one run
 * store handle). */
#ifndef MILLRACE_RUNREPORT_H
#define MILLRACE_RUNREPORT_H

#include "millrace/pipeline.h"
#include "millrace/runstore.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Artifacts a report draws from; any may be NULL. */
typedef struct mr_run_report_inputs {
    const char *title;    /* NULL = "Model report" (artifact) / "<workspace dir>: run N" */
    const char *evaluate; /* an evaluate output directory (metrics/curves/slices/errors JSON) */
    const char *model;    /* a model file or a train output directory (model.bin) */
    const char *check;    /* a check output directory (results.json) */
    const char *tune;     /* a tune output directory (trials.json, study.json); NULL = none */
    /* The stages of the run that produced them (NULL: a plain file, or not a stage). */
    const char *evaluate_stage, *model_stage, *check_stage, *tune_stage;
    int artifact;         /* 1: the report op's artifact (see above) */
} mr_run_report_inputs;

/* Writes the report of run_id (html_path; md_path may be NULL). Stage
 * records, params, per-round training metrics and data sizes come from rs:
 * an artifact report reads only the records of the stages it reports on. */
mr_status mr_run_report_write(mr_runstore *rs, int64_t run_id, const mr_run_report_inputs *in, const char *html_path,
                              const char *md_path, mr_error *err);
/* Regenerates the report of a past run: the outputs its evaluate, train,
 * check and tune stages recorded (a failed check's published results
 * included) are checked out of the store into a scratch directory and read
 * from there. */
mr_status mr_run_report_regenerate(mr_workspace *ws, int64_t run_id, const char *html_path, const char *md_path,
                                   mr_error *err);
/* Two or more runs side by side: summaries, the params table (changed rows
 * highlighted), final metrics (changed rows highlighted) and charts of each
 * run's metric changes from the first, the ROC, PR, calibration and gain
 * curves of every run overlaid where they have them, and the stages whose
 * key differs. n_runs >= 2 (MR_E_INVALID_ARG otherwise). */
mr_status mr_run_compare_html(mr_workspace *ws, const int64_t *runs, size_t n_runs, const char *html_path,
                              mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
