/* Internals shared by the run report (run_report.c) and the comparison page
 * (run_compare.c): a pool of owned strings, JSON artifact loading and text,
 * the evaluation-curve charts both draw, and checking a run's stage outputs
 * out of the store. */
#ifndef MILLRACE_REPORT_INT_H
#define MILLRACE_REPORT_INT_H

#include "millrace/report.h"
#include "millrace/runreport.h"
#include "millrace/runstore.h"

#include <jansson.h>

/* A growing list of owned strings, freed together. */
typedef struct mr__strs {
    char **v;
    size_t n, cap;
} mr__strs;
/* Takes ownership of owned and returns it (NULL on OOM or a NULL argument). */
const char *mr__strs_add(mr__strs *s, char *owned);
void mr__strs_free(mr__strs *s);

double mr__jnum(json_t *v); /* a JSON number, NaN otherwise */
/* Text of a JSON value for a table cell, caller frees: a string unquoted,
 * a number "%.6g" (a metric), an array or object as compact JSON with its
 * numbers in the shortest form that reads back (trial params: 0.1, not
 * 0.10000000000000001). */
char *mr__json_text(json_t *v);
/* A value from the run store as text (mr_runstore_value_text), caller frees. */
char *mr__value_text(const mr_value *v);
/* Loads dir/name as JSON; *out NULL (no error) when dir is NULL or the file is absent. */
mr_status mr__load_json(const char *dir, const char *name, json_t **out, mr_error *err);
/* Embeds the chart in svg under caption, then empties svg for the next. */
mr_status mr__chart_out(mr_report *r, mr_buf *svg, const char *caption, mr_error *err);

/* The evaluation curves of curves.json drawn by both pages. */
typedef struct mr__curve_spec {
    const char *key, *ykey, *title, *xl, *yl, *caption;
    int diagonal, unit, step;
} mr__curve_spec;
extern const mr__curve_spec mr__curve_specs[];
extern const size_t mr__n_curve_specs;
/* One chart of cs with one series per curves[k] that has it (names[k]). */
mr_status mr__draw_curve(mr_report *r, mr_buf *svg, const mr__curve_spec *cs, json_t *const *curves,
                         const char *const *names, size_t n_runs, int *drawn, mr_error *err);

/* A run's detail and the outputs of its last evaluate, train, check and
 * tune stages, checked out of the store under a scratch directory. */
typedef struct mr__run_art {
    mr_run_detail *detail;
    char *eval, *model, *check, *tune;                     /* checked-out directories, NULL = none */
    const char *eval_stage, *model_stage, *check_stage, *tune_stage; /* borrowed from detail */
} mr__run_art;
mr_status mr__run_artifacts(mr_workspace *ws, int64_t run, const char *tmp, mr__run_art *a, mr_error *err);
void mr__run_art_free(mr__run_art *a);

#endif
