/* Internals shared by the bundle files (bundle.c, bundle_conform.c). */
#ifndef MILLRACE_BUNDLE_INT_H
#define MILLRACE_BUNDLE_INT_H

#include "millrace/bundle.h"

/* t's columns fitted to b's input schema, typed values only (the checks of
 * mr_bundle_conform_table without text): *view is a table struct, not to be
 * given to mr_table_free, whose n_inputs columns are the inputs in schema
 * order, borrowed from t or owned through *owned_out (n_inputs entries, NULL
 * where borrowed). Release with mr__bundle_input_view_free. Errors as
 * mr_bundle_conform_table. */
mr_status mr__bundle_input_view(const mr_bundle *b, const mr_table *t, mr_table *view, mr_column ***owned_out,
                                mr_error *err);
void mr__bundle_input_view_free(const mr_bundle *b, mr_table *view, mr_column **owned);

/* The feature service section (bundle_service.c): text[0, len) checked
 * against the inputs in[0, n_in) (each feature an input; a default that
 * fits it). MR_E_PARSE with what is wrong, or MR_E_NOMEM. Free with
 * mr__bundle_service_free. */
typedef struct mr__bundle_service_doc mr__bundle_service_doc;
mr_status mr__bundle_service_parse(const char *text, size_t len, const mr_bundle_input *in, size_t n_in,
                                   mr__bundle_service_doc **out, mr_error *err);
const mr_bundle_service *mr__bundle_service_get(const mr__bundle_service_doc *d);
void mr__bundle_service_free(mr__bundle_service_doc *d);

#endif
