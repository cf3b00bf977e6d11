/* What a served model tells about its inputs (docs/serve.md, "What a
 * served model tells about itself"): per input column, the values it was
 * given leniently — a category the training data never had, a number
 * outside the training range, a float for a column whose training values
 * were all integers — and, per request, fields that are no input; and the
 * drift of each input: the population stability index of its last
 * MON_WINDOW values over the training profile's bins (include/millrace/
 * profile.h). Counters need the bundle's profile (package `reference:`),
 * except extra fields, which every bundle counts.
 *
 * The batcher observes each request's rows (mr__monitor_rows) before it
 * scores them; /metrics and /v1/drift read under the monitor's mutex. */
#include "serve/serve_int.h"

#include "millrace/profile.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MON_WINDOW 4096 /* recent values per input that drift is measured over */
#define MON_MIN_VALUES 100 /* fewer recent values: no PSI yet */

typedef struct mon_col {
    const mr_profile_column *pc; /* NULL: the profile does not describe this input */
    uint64_t unseen, out_of_range, float_for_int;
    uint16_t *ring; /* bin of each recent value */
    size_t ring_n, ring_pos;
} mon_col;

struct mr__serve_monitor {
    pthread_mutex_t mu;
    const mr_bundle *b;
    size_t n_in;
    mon_col *cols;
    uint64_t extra_fields, rows;
};

mr__serve_monitor *mr__monitor_new(const mr_bundle *b)
{
    mr__serve_monitor *m = mr_calloc(1, sizeof(*m));
    if (!m) return NULL;
    m->b = b;
    m->n_in = mr_bundle_n_inputs(b);
    m->cols = mr_calloc(m->n_in + 1, sizeof(*m->cols));
    if (!m->cols) {
        mr_free(m);
        return NULL;
    }
    const mr_profile *p = mr_bundle_profile(b);
    for (size_t i = 0; i < m->n_in; i++) {
        m->cols[i].pc = p ? mr_profile_find(p, mr_bundle_input_at(b, i)->name) : NULL;
        if (m->cols[i].pc && !(m->cols[i].ring = mr_calloc(MON_WINDOW, sizeof(uint16_t)))) {
            mr__monitor_free(m);
            return NULL;
        }
    }
    pthread_mutex_init(&m->mu, NULL);
    return m;
}

void mr__monitor_free(mr__serve_monitor *m)
{
    if (!m) return;
    for (size_t i = 0; m->cols && i < m->n_in; i++) mr_free(m->cols[i].ring);
    mr_free(m->cols);
    pthread_mutex_destroy(&m->mu);
    mr_free(m);
}

/* A value's number (numeric inputs): JSON numbers and booleans; in text
 * mode a string that parses whole. *is_float: written with a fraction or an
 * exponent (a float given for an integer column). */
static int value_num(const json_t *v, int text, double *x, int *is_float)
{
    *is_float = 0;
    if (json_is_integer(v)) {
        *x = (double)json_integer_value(v);
        return 1;
    }
    if (json_is_real(v)) {
        *x = json_real_value(v);
        *is_float = 1;
        return isfinite(*x);
    }
    if (json_is_boolean(v)) {
        *x = json_is_true(v);
        return 1;
    }
    if (text && json_is_string(v)) {
        const char *s = json_string_value(v);
        char *end = NULL;
        *x = strtod(s, &end);
        if (end == s) return 0;
        while (*end == ' ' || *end == '\t') end++;
        *is_float = strpbrk(s, ".eE") != NULL;
        return !*end && isfinite(*x);
    }
    return 0;
}

/* A value's category text: a string, an integer, a boolean. */
static int value_key(const json_t *v, char *buf, size_t len, const char **key, size_t *key_len)
{
    if (json_is_string(v)) {
        *key = json_string_value(v);
        *key_len = json_string_length(v);
        return 1;
    }
    if (json_is_integer(v)) *key_len = (size_t)snprintf(buf, len, "%lld", (long long)json_integer_value(v));
    else if (json_is_boolean(v)) *key_len = (size_t)snprintf(buf, len, "%s", json_is_true(v) ? "true" : "false");
    else return 0;
    *key = buf;
    return 1;
}

/* The first event names the request's problem: its column, row and what. */
static void note(char *why, size_t why_len, const char **field, long *row_out, long row, const char *col,
                 const char *fmt, const char *what)
{
    if (!why || why[0]) return;
    snprintf(why, why_len, fmt, col, what);
    if (field) *field = col;
    if (row_out) *row_out = row;
}

/* A field the bundle's feature service looks its features up by: no input, and expected. */
static int service_key(const mr_bundle *b, const char *name)
{
    const mr_bundle_service *svc = mr_bundle_service_of(b);
    for (size_t i = 0; svc && i < svc->n_stores; i++)
        for (size_t k = 0; k < svc->stores[i].n_keys; k++)
            if (!strcmp(svc->stores[i].key_names[k], name)) return 1;
    return 0;
}

size_t mr__monitor_rows(mr__serve_monitor *m, const mr__serve_req *q, char *why, size_t why_len, const char **field,
                        long *row_out)
{
    size_t events = 0;
    if (why && why_len) why[0] = '\0';
    pthread_mutex_lock(&m->mu);
    m->rows += q->n_rows;
    /* fields that are no input: a column of a columnar body counts for each row */
    const json_t *cols = q->columnar ? json_object_get(q->doc, "columns") : NULL;
    const char *key;
    json_t *val;
    if (cols) {
        json_object_foreach((json_t *)cols, key, val)
        {
            if (mr_bundle_input_index(m->b, key) >= 0 || service_key(m->b, key)) continue;
            m->extra_fields += q->n_rows;
            events += q->n_rows;
            note(why, why_len, field, row_out, 0, key, "'%s' is %s", "no input of the model");
        }
    }
    for (size_t r = 0; r < q->n_rows; r++) {
        if (!cols && !q->pos) { /* rows of values hold only inputs (the protocol dropped the rest) */
            json_t *row = json_array_get(json_object_get(q->doc, "rows"), r);
            json_object_foreach(row, key, val)
            {
                if (mr_bundle_input_index(m->b, key) >= 0 || service_key(m->b, key)) continue;
                m->extra_fields++;
                events++;
                note(why, why_len, field, row_out, (long)r, key, "'%s' is %s", "no input of the model");
            }
        }
        for (size_t i = 0; i < m->n_in; i++) {
            mon_col *c = &m->cols[i];
            if (!c->pc) continue;
            const char *name = mr_bundle_input_at(m->b, i)->name;
            const json_t *v = mr__serve_req_value(q, i, name, r);
            if (!v || json_is_null(v)) continue;
            size_t bin;
            if (c->pc->categorical) {
                char buf[32];
                const char *k;
                size_t kl;
                if (!value_key(v, buf, sizeof(buf), &k, &kl)) continue;
                bin = mr_profile_category(c->pc, k, kl);
                if (bin == c->pc->n_categories && c->pc->complete) {
                    c->unseen++;
                    events++;
                    note(why, why_len, field, row_out, (long)r, name, "'%s': %s", "a category the training data did not have");
                }
            } else {
                double x;
                int is_float;
                if (!value_num(v, q->text, &x, &is_float)) continue;
                bin = mr_profile_bin(c->pc, x);
                if (x < c->pc->min || x > c->pc->max) {
                    c->out_of_range++;
                    events++;
                    note(why, why_len, field, row_out, (long)r, name, "'%s': %s", "a value outside the training range");
                }
                if (c->pc->integral && is_float) {
                    c->float_for_int++;
                    events++;
                    note(why, why_len, field, row_out, (long)r, name, "'%s': %s", "a float for a column of integers");
                }
            }
            c->ring[c->ring_pos] = (uint16_t)bin;
            c->ring_pos = (c->ring_pos + 1) % MON_WINDOW;
            if (c->ring_n < MON_WINDOW) c->ring_n++;
        }
    }
    pthread_mutex_unlock(&m->mu);
    return events;
}

/* PSI of input i's recent values (NAN: fewer than MON_MIN_VALUES). Under mu. */
static double psi_of(const mon_col *c)
{
    if (!c->pc || c->ring_n < MON_MIN_VALUES) return NAN;
    uint64_t counts[MR_PROFILE_MAX_CATEGORIES + 1];
    memset(counts, 0, sizeof(counts));
    for (size_t k = 0; k < c->ring_n; k++)
        if (c->ring[k] < c->pc->n_bins) counts[c->ring[k]]++;
    return mr_profile_psi(c->pc, counts);
}

static void label(mr_buf *out, const char *name)
{
    mr_buf_puts(out, "{column=\"");
    for (const char *p = name; *p; p++) { /* Prometheus label escaping: \\ \" \n */
        if (*p == '\\' || *p == '"') mr_buf_printf(out, "\\%c", *p);
        else if (*p == '\n') mr_buf_puts(out, "\\n");
        else mr_buf_append(out, p, 1);
    }
    mr_buf_puts(out, "\"}");
}

void mr__monitor_metrics(mr__serve_monitor *m, mr_buf *out)
{
    static const char *const names[3] = {"millrace_input_unseen_category_total", "millrace_input_out_of_range_total",
                                         "millrace_input_float_for_int_total"};
    static const char *const help[3] = {"Categories the training data did not have, per input.",
                                        "Numbers outside the training range, per input.",
                                        "Floats given for an input whose training values were all integers."};
    pthread_mutex_lock(&m->mu);
    for (int k = 0; k < 3; k++) {
        mr_buf_printf(out, "# HELP %s %s\n# TYPE %s counter\n", names[k], help[k], names[k]);
        for (size_t i = 0; i < m->n_in; i++) {
            const mon_col *c = &m->cols[i];
            if (!c->pc || (k == 0) != (c->pc->categorical != 0)) continue;
            if (k == 2 && !c->pc->integral) continue;
            mr_buf_puts(out, names[k]);
            label(out, mr_bundle_input_at(m->b, i)->name);
            mr_buf_printf(out, " %llu\n", (unsigned long long)(k == 0 ? c->unseen : k == 1 ? c->out_of_range : c->float_for_int));
        }
    }
    mr_buf_printf(out,
                  "# HELP millrace_input_extra_fields_total Request fields that are no input of the model.\n"
                  "# TYPE millrace_input_extra_fields_total counter\nmillrace_input_extra_fields_total %llu\n",
                  (unsigned long long)m->extra_fields);
    mr_buf_puts(out, "# HELP millrace_input_psi Population stability index of each input's recent values against "
                     "the training profile.\n# TYPE millrace_input_psi gauge\n");
    for (size_t i = 0; i < m->n_in; i++) {
        double psi = psi_of(&m->cols[i]);
        if (isnan(psi)) continue;
        mr_buf_puts(out, "millrace_input_psi");
        label(out, mr_bundle_input_at(m->b, i)->name);
        mr_buf_printf(out, " %.6g\n", psi);
    }
    pthread_mutex_unlock(&m->mu);
}

void mr__monitor_drift_json(mr__serve_monitor *m, const char *version, mr_buf *out)
{
    pthread_mutex_lock(&m->mu);
    mr_buf_puts(out, "{\"model_version\": ");
    mr_buf_json_str(out, version);
    mr_buf_printf(out, ", \"profile\": %s, \"threshold\": %g, \"window\": %d, \"rows\": %llu, \"columns\": [",
                  mr_bundle_profile(m->b) ? "true" : "false", MR_PSI_SHIFTED, MON_WINDOW,
                  (unsigned long long)m->rows);
    int first = 1;
    for (size_t i = 0; i < m->n_in; i++) {
        const mon_col *c = &m->cols[i];
        if (!c->pc) continue;
        double psi = psi_of(c);
        mr_buf_puts(out, first ? "{\"name\": " : ", {\"name\": ");
        first = 0;
        mr_buf_json_text(out, mr_bundle_input_at(m->b, i)->name, strlen(mr_bundle_input_at(m->b, i)->name));
        mr_buf_printf(out, ", \"values\": %zu, \"psi\": ", c->ring_n);
        if (isnan(psi)) mr_buf_puts(out, "null");
        else mr_buf_printf(out, "%.6g", psi);
        mr_buf_printf(out, ", \"shifted\": %s, \"unseen_category\": %llu, \"out_of_range\": %llu, \"float_for_int\": %llu}",
                      !isnan(psi) && psi > MR_PSI_SHIFTED ? "true" : "false", (unsigned long long)c->unseen,
                      (unsigned long long)c->out_of_range, (unsigned long long)c->float_for_int);
    }
    mr_buf_printf(out, "], \"extra_fields\": %llu}\n", (unsigned long long)m->extra_fields);
    pthread_mutex_unlock(&m->mu);
}
