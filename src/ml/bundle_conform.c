/* Fitting raw values to a bundle's input schema (include/millrace/bundle.h,
 * "fitting values to the input schema"): the one set of rules by which a
 * table cell, a CSV field or a JSON value becomes an input of the features
 * transform, and the one wording of what does not fit.
 * mr_bundle_predict_table, `millrace predict` and `millrace serve` all come
 * through here; nothing else converts values for a bundle. */
#include "ml/bundle_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mr_dtype mr_bundle_input_column_type(const mr_bundle_input *in)
{
    if (!in->categorical) return MR_T_FLOAT64;
    if (in->type == MR_T_INT64 || in->type == MR_T_BOOL) return in->type;
    return MR_T_STRING;
}

static const char *expected_of(mr_dtype column_type)
{
    switch (column_type) {
    case MR_T_FLOAT64: return "a number";
    case MR_T_INT64: return "an integer category";
    case MR_T_BOOL: return "true or false";
    default: return "a string";
    }
}

void mr_bundle_bad_format(const mr_bundle_bad *bad, char *buf, size_t buf_len)
{
    if (!buf_len) return;
    if (bad->missing)
        snprintf(buf, buf_len, "row %llu: input column '%s' is missing", (unsigned long long)bad->row, bad->column);
    else
        snprintf(buf, buf_len, "row %llu: column '%s': expected %s, got %s", (unsigned long long)bad->row, bad->column,
                 bad->expected, bad->got);
}

/* ---- text fields ------------------------------------------------------------- */

/* A number that parses completely: strtod's syntax, blanks around it allowed.
 * Fields of 128 bytes or more are not numbers. */
static int text_num(const char *s, size_t len, double *out)
{
    char buf[128];
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    double v = strtod(buf, &end);
    while (end && (*end == ' ' || *end == '\t')) end++;
    if (end == buf || !end || *end != '\0') return 0;
    *out = v;
    return 1;
}

/* A decimal integer in int64 range, nothing around it. */
static int text_int(const char *s, size_t len, int64_t *out)
{
    char buf[32];
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    errno = 0;
    long long v = strtoll(buf, &end, 10);
    if (end == buf || *end != '\0' || errno == ERANGE) return 0;
    *out = (int64_t)v;
    return 1;
}

static int text_bool(const char *s, size_t len, int *out)
{
    if (len == 4 && !memcmp(s, "true", 4)) *out = 1;
    else if (len == 5 && !memcmp(s, "false", 5)) *out = 0;
    else return 0;
    return 1;
}

/* ---- one value --------------------------------------------------------------- */

static mr_status bad_value(const mr_bundle_input *in, size_t i, const mr_cell *v, mr_bundle_bad *bad)
{
    memset(bad, 0, sizeof(*bad));
    bad->input = i;
    bad->column = in->name;
    bad->expected = expected_of(mr_bundle_input_column_type(in));
    switch (v->kind) {
    case MR_CELL_STR:
        bad->text = v->str;
        bad->text_len = v->len;
        snprintf(bad->got, sizeof(bad->got), "\"%.*s\"", (int)(v->len > 64 ? 64 : v->len), v->str);
        break;
    case MR_CELL_NUM: snprintf(bad->got, sizeof(bad->got), "%.17g", v->num); break;
    case MR_CELL_INT: snprintf(bad->got, sizeof(bad->got), "%lld", (long long)v->i); break;
    case MR_CELL_BOOL: snprintf(bad->got, sizeof(bad->got), "%s", v->i ? "true" : "false"); break;
    default:
        if (v->str) snprintf(bad->got, sizeof(bad->got), "%.*s", (int)(v->len > 64 ? 64 : v->len), v->str);
        else snprintf(bad->got, sizeof(bad->got), "a value of another kind");
        break;
    }
    return MR_E_PARSE;
}

mr_status mr_bundle_coerce_value(const mr_bundle *b, size_t i, const mr_cell *v, int text, mr_column *col,
                                 mr_bundle_bad *bad)
{
    const mr_bundle_input *in = mr_bundle_input_at(b, i);
    mr_dtype ct = mr_bundle_input_column_type(in);
    if (!v || v->kind == MR_CELL_NULL) {
        if (!v && in->required) {
            memset(bad, 0, sizeof(*bad));
            bad->input = i;
            bad->column = in->name;
            bad->missing = 1;
            return MR_E_PARSE;
        }
        return col ? mr_column_append_null(col) : MR_OK;
    }
    int is_text = text && v->kind == MR_CELL_STR;
    switch (ct) {
    case MR_T_FLOAT64: {
        double x = 0.0;
        if (v->kind == MR_CELL_NUM) x = v->num;
        else if (v->kind == MR_CELL_INT) x = (double)v->i;
        else if (v->kind == MR_CELL_BOOL) x = v->i ? 1.0 : 0.0;
        else if (!is_text || !text_num(v->str, v->len, &x)) return bad_value(in, i, v, bad);
        return col ? mr_column_append_float64(col, x) : MR_OK;
    }
    case MR_T_INT64: {
        int64_t x = 0;
        if (v->kind == MR_CELL_INT) x = v->i;
        else if (!is_text || !text_int(v->str, v->len, &x)) return bad_value(in, i, v, bad);
        return col ? mr_column_append_int64(col, x) : MR_OK;
    }
    case MR_T_BOOL: {
        int x = 0;
        if (v->kind == MR_CELL_BOOL) x = v->i != 0;
        else if (!is_text || !text_bool(v->str, v->len, &x)) return bad_value(in, i, v, bad);
        return col ? mr_column_append_bool(col, x) : MR_OK;
    }
    default:
        if (v->kind != MR_CELL_STR) return bad_value(in, i, v, bad);
        return col ? mr_column_append_str(col, v->str, v->len) : MR_OK;
    }
}

/* ---- whole tables ------------------------------------------------------------ */

void mr_bundle_conform_opts_init(mr_bundle_conform_opts *o) { memset(o, 0, sizeof(*o)); }

static int type_fits(const mr_bundle_input *in, mr_dtype t)
{
    if (t == MR_T_NULL) return 1;
    if (in->categorical) return t == MR_T_STRING || t == MR_T_INT64 || t == MR_T_BOOL;
    return t == MR_T_BOOL || t == MR_T_INT64 || t == MR_T_FLOAT64 || t == MR_T_FLOAT32 || t == MR_T_DECIMAL;
}

/* Converts text column c for input i into *out. In fail mode (no on_bad)
 * stops at the column's first bad value, which goes to *first when its row
 * is lower than the one there. */
static mr_status convert_text(const mr_bundle *b, size_t i, const mr_column *c, const mr_bundle_conform_opts *o,
                              mr_column **out, mr_bundle_bad *first, int *have_first, mr_error *err)
{
    const mr_bundle_input *in = mr_bundle_input_at(b, i);
    mr_status rc = mr_column_new(in->name, mr_bundle_input_column_type(in), c->n, out, err);
    for (size_t r = 0; rc == MR_OK && r < c->n; r++) {
        mr_cell cell;
        mr_bundle_bad bad;
        mr_features_cell(c, r, &cell);
        rc = mr_bundle_coerce_value(b, i, &cell, 1, *out, &bad);
        if (rc != MR_E_PARSE) continue;
        bad.row = o->row_base + r;
        if (o->bad_rows) o->bad_rows[r] = 1;
        if (!o->on_bad) {
            if (!*have_first || bad.row < first->row) *first = bad;
            *have_first = 1;
            return MR_OK; /* the caller fails after looking at the other columns */
        }
        o->on_bad(o->ctx, &bad);
        rc = mr_column_append_null(*out);
    }
    if (rc != MR_OK) {
        mr_column_free(*out);
        *out = NULL;
        if (rc == MR_E_NOMEM) rc = MR_ERR(err, rc, "out of memory converting column '%s'", in->name);
    }
    return rc;
}

/* For each input i: cols[i] = t's column when it fits as it is, else a new
 * column (converted text, or all null for an absent optional input) in
 * owned[i] and cols[i]. On failure every owned column is freed. */
static mr_status conform_cols(const mr_bundle *b, const mr_table *t, const mr_bundle_conform_opts *o,
                              const mr_column **cols, mr_column **owned, mr_error *err)
{
    mr_bundle_conform_opts none;
    if (!o) {
        mr_bundle_conform_opts_init(&none);
        o = &none;
    }
    mr_status rc = MR_OK;
    mr_bundle_bad first;
    int have_first = 0;
    size_t n_in = mr_bundle_n_inputs(b);
    for (size_t i = 0; rc == MR_OK && i < n_in; i++) {
        const mr_bundle_input *in = mr_bundle_input_at(b, i);
        const mr_column *c = mr_table_column_hint(t, i, in->name);
        owned[i] = NULL;
        cols[i] = c;
        if (!c) {
            if (in->required) {
                rc = MR_ERR(err, MR_E_NOT_FOUND, "input column '%s' is missing", in->name);
                mr_error_key(err, in->name);
                break;
            }
            rc = mr_column_new(in->name, mr_bundle_input_column_type(in), t->n_rows, &owned[i], err);
            for (size_t r = 0; rc == MR_OK && r < t->n_rows; r++) rc = mr_column_append_null(owned[i]);
            if (rc == MR_E_NOMEM) rc = MR_ERR(err, rc, "out of memory");
        } else if (o->text && c->type == MR_T_STRING && mr_bundle_input_column_type(in) != MR_T_STRING) {
            rc = convert_text(b, i, c, o, &owned[i], &first, &have_first, err);
        } else if (!type_fits(in, c->type)) {
            rc = MR_ERR(err, MR_E_SCHEMA, "input column '%s' has type %s; the bundle expects %s (%s)", in->name,
                        mr_dtype_name(c->type), in->categorical ? "a category (string, int or bool)" : "a number",
                        mr_dtype_name(in->type));
            mr_error_key(err, in->name);
        }
        if (owned[i]) cols[i] = owned[i];
    }
    if (rc == MR_OK && have_first) {
        char msg[MR_ERR_MSG_MAX];
        mr_bundle_bad_format(&first, msg, sizeof(msg));
        rc = MR_ERR(err, MR_E_PARSE, "%s", msg);
        mr_error_key(err, first.column);
    }
    if (rc != MR_OK)
        for (size_t i = 0; i < n_in; i++) {
            mr_column_free(owned[i]);
            owned[i] = NULL;
        }
    return rc;
}

mr_status mr_bundle_conform_table(const mr_bundle *b, mr_table *t, const mr_bundle_conform_opts *o, mr_error *err)
{
    size_t n_in = mr_bundle_n_inputs(b);
    const mr_column **cols = mr_calloc(n_in ? n_in : 1, sizeof(*cols));
    mr_column **owned = mr_calloc(n_in ? n_in : 1, sizeof(*owned));
    mr_status rc = cols && owned ? conform_cols(b, t, o, cols, owned, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n_in; i++) {
        if (!owned[i]) continue;
        ssize_t j = mr_table_column_index(t, owned[i]->name); /* O(1): the table's name index */
        rc = j >= 0 ? mr_table_set_column(t, (size_t)j, owned[i], err) /* these take it, also on failure */
                    : mr_table_add_column(t, owned[i], err);
        owned[i] = NULL;
    }
    for (size_t i = 0; owned && i < n_in; i++) mr_column_free(owned[i]);
    mr_free(owned);
    mr_free(cols);
    return rc;
}

mr_status mr__bundle_input_view(const mr_bundle *b, const mr_table *t, mr_table *view, mr_column ***owned_out,
                                mr_error *err)
{
    size_t n_in = mr_bundle_n_inputs(b);
    const mr_column **cols = mr_calloc(n_in ? n_in : 1, sizeof(*cols));
    mr_column **owned = mr_calloc(n_in ? n_in : 1, sizeof(*owned));
    *owned_out = NULL;
    memset(view, 0, sizeof(*view));
    mr_status rc = cols && owned ? conform_cols(b, t, NULL, cols, owned, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc != MR_OK) {
        mr_free(cols);
        mr_free(owned);
        return rc;
    }
    view->n_rows = t->n_rows;
    view->n_cols = n_in;
    view->cols = (mr_column **)cols; /* read only: the columns stay t's or owned's */
    *owned_out = owned;
    return MR_OK;
}

void mr__bundle_input_view_free(const mr_bundle *b, mr_table *view, mr_column **owned)
{
    for (size_t i = 0; owned && i < mr_bundle_n_inputs(b); i++) mr_column_free(owned[i]);
    mr_free(owned);
    mr_free(view->cols);
    memset(view, 0, sizeof(*view));
}
