/* The training profile of a bundle's inputs (docs/bundle.md, "Profile";
 * docs/serve.md, "What a served model tells about itself"): for each raw
 * input column of the reference data (the training set), what the values
 * were — a numeric column's range, whether every value was an integer, ten
 * quantile bins with the share of values in each; a categorical column's
 * categories with their shares — and the share of nulls. The server counts
 * the inputs that fall outside it (an unseen category, a value out of the
 * training range, a float given for an integer column) and measures drift
 * as the population stability index of recent values over the same bins:
 *
 *   PSI = sum over bins of (p_recent - p_train) * ln(p_recent / p_train)
 *
 * with each share floored at 1e-4 (an empty bin counts as a small one).
 * PSI below 0.1 is the usual reading of "no shift", above 0.25 of a major
 * one (MR_PSI_SHIFTED).
 *
 * Example (given const mr_table *train):
 *
 *   const char *names[] = {"age", "plan"};
 *   const int cat[] = {0, 1};
 *   mr_buf json;
 *   mr_buf_init(&json);
 *   mr_profile *p = NULL;
 *   if (mr_profile_build(train, names, cat, 2, &json, &err) == MR_OK &&
 *       mr_profile_parse(json.data, json.len, &p, &err) == MR_OK) {
 *       const mr_profile_column *age = mr_profile_column_at(p, 0);
 *       printf("age %g..%g, bin of 42: %zu\n", age->min, age->max, mr_profile_bin(age, 42));
 *   }
 *   mr_profile_free(p);
 *   mr_buf_free(&json);
 *
 * Ownership: a profile is the caller's (mr_profile_free); columns are
 * borrowed from it. Status codes: MR_E_NOT_FOUND (a named column is not in
 * the table), MR_E_CORRUPT (a profile document that is not one: what is
 * wrong), MR_E_NOMEM. Thread safety: a parsed profile is read-only. */
#ifndef MILLRACE_PROFILE_H
#define MILLRACE_PROFILE_H

#include "millrace/core.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_PROFILE_BINS 10           /* quantile bins of a numeric column */
#define MR_PROFILE_MAX_CATEGORIES 256 /* kept per categorical column; the rest is "other" */
#define MR_PSI_SHIFTED 0.25          /* the documented threshold of a major shift */

typedef struct mr_profile mr_profile;

typedef struct mr_profile_column {
    const char *name;
    int categorical;
    double null_fraction;
    /* numeric */
    double min, max;       /* NAN when the column had no value */
    int integral;          /* every value was an integer */
    size_t n_bins;         /* numeric: bins (edges n_bins - 1, inner cut points, ascending); categorical:
                              n_categories + 1 (the last is every other category) */
    const double *edges;
    const double *fractions; /* per bin: the share of the non-null training values */
    /* categorical */
    size_t n_categories;
    const char *const *categories; /* as text: "pro", "7", "true" */
    int complete;          /* every category of the training data is listed */
} mr_profile_column;

/* The profile of the columns names[0..n) of t (categorical[i]: a category
 * column) as its JSON document, appended to json_out. Deterministic: the
 * same table gives the same bytes. */
mr_status mr_profile_build(const mr_table *t, const char *const *names, const int *categorical, size_t n,
                           mr_buf *json_out, mr_error *err);
mr_status mr_profile_parse(const char *json, size_t len, mr_profile **out, mr_error *err);
void mr_profile_free(mr_profile *p); /* NULL is a no-op */
size_t mr_profile_n_columns(const mr_profile *p);
const mr_profile_column *mr_profile_column_at(const mr_profile *p, size_t i);
const mr_profile_column *mr_profile_find(const mr_profile *p, const char *name); /* NULL if absent */
/* The bin of a numeric value: the number of edges below it (edges are
 * upper-inclusive: v == edge falls in the lower bin). */
size_t mr_profile_bin(const mr_profile_column *c, double v);
/* The category's index, or n_categories (other) when it is not listed. */
size_t mr_profile_category(const mr_profile_column *c, const char *key, size_t len);
/* PSI of counts[0..c->n_bins) (recent values per bin) against the training
 * shares; NAN when total is 0. */
double mr_profile_psi(const mr_profile_column *c, const uint64_t *counts);

#ifdef __cplusplus
}
#endif
#endif
