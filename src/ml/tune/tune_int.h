/* Internals shared by the files of src/ml/tune/. */
#ifndef MILLRACE_TUNE_INT_H
#define MILLRACE_TUNE_INT_H

#include "millrace/tune.h"

#include <stdlib.h>
#include <sys/types.h>

typedef struct mr__tune_param {
    char *name;
    mr_tune_kind kind;
    double lo, hi;       /* bounds (choice: 0 .. n_choices - 1) */
    int log;             /* sampled on a log scale */
    mr_value **choices;  /* choice options */
    size_t n_choices;
    int when_parent;     /* index of the parent choice parameter, -1 = always active */
    int *when_idx;       /* option indices of the parent that activate this one */
    size_t n_when;
} mr__tune_param;

struct mr_tune_space {
    mr__tune_param *p;
    size_t n;
    size_t *order;       /* sampling order: every parent before its children */
};

#endif
