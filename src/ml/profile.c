/* The training profile of a bundle's inputs (include/millrace/profile.h):
 * built from the reference table by the package op, stored as the bundle's
 * "profile" section (JSON), read back by the server for its input counters
 * and its drift. Quantile edges are order statistics of the sorted
 * non-null values, deduplicated, so a column with few distinct values has
 * fewer bins; categories are sorted by share (then by text) and cut at
 * MR_PROFILE_MAX_CATEGORIES. */
#include "millrace/profile.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SHARE_FLOOR 1e-4

typedef struct pcol {
    mr_profile_column c;
    char *name;
    double *edges, *fractions;
    char **categories;
} pcol;

struct mr_profile {
    pcol *cols;
    size_t n;
};

/* ---- building ------------------------------------------------------------------------- */

static int num_at(const mr_column *c, size_t i, double *v)
{
    if (mr_column_is_null(c, i)) return 0;
    switch (c->type) {
    case MR_T_FLOAT64: *v = ((const double *)c->data)[i]; return !isnan(*v);
    case MR_T_FLOAT32: *v = ((const float *)c->data)[i]; return !isnan(*v);
    case MR_T_INT64: *v = (double)((const int64_t *)c->data)[i]; return 1;
    case MR_T_BOOL: *v = ((const uint8_t *)c->data)[i] ? 1 : 0; return 1;
    default: return 0;
    }
}

/* A category's text: the string, the integer in decimal, true/false. */
static int key_at(const mr_column *c, size_t i, char *buf, size_t buf_len, const char **s, size_t *len)
{
    if (mr_column_is_null(c, i)) return 0;
    switch (c->type) {
    case MR_T_STRING: *s = mr_column_str(c, i, len); return 1;
    case MR_T_INT64: *len = (size_t)snprintf(buf, buf_len, "%lld", (long long)((const int64_t *)c->data)[i]); break;
    case MR_T_BOOL: *len = (size_t)snprintf(buf, buf_len, "%s", ((const uint8_t *)c->data)[i] ? "true" : "false"); break;
    default: return 0;
    }
    *s = buf;
    return 1;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

typedef struct cat_count {
    char *key;
    uint64_t n;
} cat_count;

static int cmp_cat(const void *a, const void *b)
{
    const cat_count *x = a, *y = b;
    if (x->n != y->n) return x->n > y->n ? -1 : 1;
    return strcmp(x->key, y->key);
}

static const char *cat_name(const void *ctx, size_t id) { return ((const cat_count *)ctx)[id].key; }

static json_t *jnum(double v) { return isfinite(v) ? json_real(v) : json_null(); }

static mr_status profile_numeric(const mr_column *col, json_t *o)
{
    double *v = mr_malloc((col->n ? col->n : 1) * sizeof(*v));
    if (!v) return MR_E_NOMEM;
    size_t n = 0;
    int integral = 1;
    for (size_t i = 0; i < col->n; i++) {
        double x;
        if (!num_at(col, i, &x)) continue;
        v[n++] = x;
        if (x != floor(x)) integral = 0;
    }
    qsort(v, n, sizeof(*v), cmp_double);
    json_t *edges = json_array(), *fr = json_array();
    double cut[MR_PROFILE_BINS];
    size_t n_cut = 0;
    for (int q = 1; n && q < MR_PROFILE_BINS; q++) {
        double e = v[(size_t)((double)q * (double)(n - 1) / MR_PROFILE_BINS)];
        if (n_cut == 0 || e > cut[n_cut - 1]) cut[n_cut++] = e;
    }
    if (n_cut && cut[n_cut - 1] >= v[n - 1]) n_cut--; /* the top edge would leave its bin empty */
    uint64_t counts[MR_PROFILE_BINS] = {0};
    for (size_t i = 0, b = 0; i < n; i++) {
        while (b < n_cut && v[i] > cut[b]) b++;
        counts[b]++;
    }
    for (size_t b = 0; b < n_cut; b++) json_array_append_new(edges, json_real(cut[b]));
    for (size_t b = 0; b <= n_cut; b++) json_array_append_new(fr, json_real(n ? (double)counts[b] / (double)n : 0));
    json_object_set_new(o, "min", jnum(n ? v[0] : NAN));
    json_object_set_new(o, "max", jnum(n ? v[n - 1] : NAN));
    json_object_set_new(o, "integral", json_boolean(n && integral));
    json_object_set_new(o, "edges", edges);
    json_object_set_new(o, "fractions", fr);
    mr_free(v);
    return MR_OK;
}

static mr_status profile_categorical(const mr_column *col, json_t *o)
{
    cat_count *cats = NULL;
    size_t n_cats = 0, cap = 0;
    uint64_t n = 0;
    mr_strindex ix;
    mr_strindex_init(&ix);
    mr_status st = MR_OK;
    char buf[32], *tmp = NULL;
    for (size_t i = 0; i < col->n && st == MR_OK; i++) {
        const char *s;
        size_t len;
        if (!key_at(col, i, buf, sizeof(buf), &s, &len)) continue;
        n++;
        mr_free(tmp);
        tmp = mr_malloc(len + 1);
        if (!tmp) {
            st = MR_E_NOMEM;
            break;
        }
        memcpy(tmp, s, len);
        tmp[len] = '\0';
        ssize_t j = mr_strindex_find(&ix, tmp, cat_name, cats);
        if (j >= 0) {
            cats[j].n++;
            continue;
        }
        if (n_cats == cap) {
            size_t nc = cap ? cap * 2 : 16;
            cat_count *ncats = mr_realloc(cats, nc * sizeof(*ncats));
            if (!ncats) {
                st = MR_E_NOMEM;
                break;
            }
            /* the index holds ids, not pointers: it survives the move */
            cats = ncats;
            cap = nc;
        }
        cats[n_cats].key = tmp;
        cats[n_cats].n = 1;
        tmp = NULL;
        st = mr_strindex_add(&ix, n_cats, cat_name, cats, NULL);
        n_cats++;
    }
    mr_free(tmp);
    mr_strindex_deinit(&ix);
    if (st == MR_OK) {
        qsort(cats, n_cats, sizeof(*cats), cmp_cat);
        size_t keep = n_cats < MR_PROFILE_MAX_CATEGORIES ? n_cats : MR_PROFILE_MAX_CATEGORIES;
        json_t *names = json_array(), *fr = json_array();
        uint64_t rest = 0;
        for (size_t k = 0; k < n_cats; k++) {
            if (k < keep) {
                json_array_append_new(names, json_string(cats[k].key));
                json_array_append_new(fr, json_real((double)cats[k].n / (double)n));
            } else {
                rest += cats[k].n;
            }
        }
        json_array_append_new(fr, json_real(n ? (double)rest / (double)n : 0));
        json_object_set_new(o, "categories", names);
        json_object_set_new(o, "fractions", fr);
        json_object_set_new(o, "complete", json_boolean(keep == n_cats));
    }
    for (size_t k = 0; k < n_cats; k++) mr_free(cats[k].key);
    mr_free(cats);
    return st;
}

mr_status mr_profile_build(const mr_table *t, const char *const *names, const int *categorical, size_t n,
                           mr_buf *json_out, mr_error *err)
{
    uint64_t failures = mr_alloc_failures_here(); /* jansson drops what it cannot allocate */
    json_t *doc = json_object(), *cols = json_array();
    mr_status st = doc && cols ? MR_OK : MR_E_NOMEM;
    json_object_set_new(doc, "format", json_string("millrace-profile/1"));
    json_object_set_new(doc, "rows", json_integer((json_int_t)t->n_rows));
    for (size_t i = 0; i < n && st == MR_OK; i++) {
        const mr_column *col = mr_table_column(t, names[i]);
        if (!col) {
            st = MR_ERR(err, MR_E_NOT_FOUND, "the reference data has no column '%s' (an input of the bundle)",
                        names[i]);
            mr_error_key(err, names[i]);
            break;
        }
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(names[i]));
        json_object_set_new(o, "categorical", json_boolean(categorical[i]));
        json_object_set_new(o, "null_fraction",
                            json_real(col->n ? (double)col->null_count / (double)col->n : 0));
        st = categorical[i] ? profile_categorical(col, o) : profile_numeric(col, o);
        json_array_append_new(cols, o);
    }
    json_object_set_new(doc, "columns", cols);
    char *text = st == MR_OK ? json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(doc);
    if (st == MR_OK && (!text || mr_alloc_failures_here() != failures)) st = MR_E_NOMEM;
    if (st == MR_OK) st = mr_buf_puts(json_out, text);
    free(text);
    if (st != MR_OK && !mr_error_is_set(err)) MR_ERR(err, st, "out of memory building the input profile");
    return st;
}

/* ---- reading -------------------------------------------------------------------------- */

void mr_profile_free(mr_profile *p)
{
    if (!p) return;
    for (size_t i = 0; i < p->n; i++) {
        pcol *c = &p->cols[i];
        mr_free(c->name);
        mr_free(c->edges);
        mr_free(c->fractions);
        for (size_t k = 0; c->categories && k < c->c.n_categories; k++) mr_free(c->categories[k]);
        mr_free(c->categories);
    }
    mr_free(p->cols);
    mr_free(p);
}

static mr_status bad(mr_error *err, const char *what) { return MR_ERR(err, MR_E_CORRUPT, "input profile: %s", what); }

static double num_or_nan(const json_t *v) { return json_is_number(v) ? json_number_value(v) : NAN; }

static mr_status parse_col(const json_t *o, pcol *c, mr_error *err)
{
    const char *name = json_string_value(json_object_get(o, "name"));
    json_t *fr = json_object_get(o, "fractions");
    if (!name || !json_is_array(fr) || json_array_size(fr) == 0 || json_array_size(fr) > MR_PROFILE_MAX_CATEGORIES + 1)
        return bad(err, "a column without a name or with a bad list of fractions");
    c->name = mr_strdup(name);
    c->c.name = c->name;
    c->c.categorical = json_is_true(json_object_get(o, "categorical"));
    c->c.null_fraction = num_or_nan(json_object_get(o, "null_fraction"));
    size_t nb = json_array_size(fr);
    c->fractions = mr_calloc(nb, sizeof(*c->fractions));
    if (!c->name || !c->fractions) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < nb; k++) {
        double f = num_or_nan(json_array_get(fr, k));
        if (!(f >= 0 && f <= 1)) return bad(err, "a fraction outside 0..1");
        c->fractions[k] = f;
    }
    c->c.fractions = c->fractions;
    c->c.n_bins = nb;
    c->c.min = c->c.max = NAN;
    if (c->c.categorical) {
        json_t *cats = json_object_get(o, "categories");
        if (!json_is_array(cats) || json_array_size(cats) + 1 != nb) return bad(err, "categories and fractions disagree");
        c->categories = mr_calloc(nb, sizeof(*c->categories));
        if (!c->categories) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; k + 1 < nb; k++) {
            const char *s = json_string_value(json_array_get(cats, k));
            if (!s) return bad(err, "a category that is not a string");
            c->categories[k] = mr_strdup(s);
            c->c.n_categories = k + 1;
            if (!c->categories[k]) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        c->c.categories = (const char *const *)c->categories;
        c->c.complete = json_is_true(json_object_get(o, "complete"));
        return MR_OK;
    }
    json_t *edges = json_object_get(o, "edges");
    if (!json_is_array(edges) || json_array_size(edges) + 1 != nb || nb > MR_PROFILE_BINS)
        return bad(err, "edges and fractions disagree");
    c->edges = mr_calloc(nb, sizeof(*c->edges));
    if (!c->edges) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k + 1 < nb; k++) {
        c->edges[k] = num_or_nan(json_array_get(edges, k));
        if (!isfinite(c->edges[k]) || (k && c->edges[k] <= c->edges[k - 1])) return bad(err, "edges not ascending");
    }
    c->c.edges = c->edges;
    c->c.min = num_or_nan(json_object_get(o, "min"));
    c->c.max = num_or_nan(json_object_get(o, "max"));
    c->c.integral = json_is_true(json_object_get(o, "integral"));
    return MR_OK;
}

mr_status mr_profile_parse(const char *json, size_t len, mr_profile **out, mr_error *err)
{
    *out = NULL;
    json_t *doc = NULL;
    mr_status st = mr_json_parse(json, len, 0, &doc, "input profile", err);
    if (st != MR_OK) return st;
    mr_profile *p = mr_calloc(1, sizeof(*p));
    json_t *cols = json_object_get(doc, "columns");
    const char *fmt = json_string_value(json_object_get(doc, "format"));
    if (!p) st = MR_ERR(err, MR_E_NOMEM, "out of memory");
    else if (!fmt || strcmp(fmt, "millrace-profile/1") || !json_is_array(cols))
        st = bad(err, "not a millrace-profile/1 document");
    if (st == MR_OK) {
        p->cols = mr_calloc(json_array_size(cols) + 1, sizeof(*p->cols));
        if (!p->cols) st = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0; st == MR_OK && i < json_array_size(cols); i++) {
        st = parse_col(json_array_get(cols, i), &p->cols[i], err);
        p->n = i + 1;
    }
    json_decref(doc);
    if (st != MR_OK) {
        mr_profile_free(p);
        return st;
    }
    *out = p;
    return MR_OK;
}

size_t mr_profile_n_columns(const mr_profile *p) { return p ? p->n : 0; }
const mr_profile_column *mr_profile_column_at(const mr_profile *p, size_t i) { return &p->cols[i].c; }

const mr_profile_column *mr_profile_find(const mr_profile *p, const char *name)
{
    for (size_t i = 0; p && i < p->n; i++)
        if (!strcmp(p->cols[i].name, name)) return &p->cols[i].c;
    return NULL;
}

size_t mr_profile_bin(const mr_profile_column *c, double v)
{
    size_t lo = 0, hi = c->n_bins ? c->n_bins - 1 : 0; /* the number of edges below v */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (v > c->edges[mid]) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

size_t mr_profile_category(const mr_profile_column *c, const char *key, size_t len)
{
    for (size_t k = 0; k < c->n_categories; k++)
        if (strlen(c->categories[k]) == len && !memcmp(c->categories[k], key, len)) return k;
    return c->n_categories;
}

double mr_profile_psi(const mr_profile_column *c, const uint64_t *counts)
{
    uint64_t total = 0;
    for (size_t k = 0; k < c->n_bins; k++) total += counts[k];
    if (!total) return NAN;
    double psi = 0;
    for (size_t k = 0; k < c->n_bins; k++) {
        double p = fmax((double)counts[k] / (double)total, SHARE_FLOOR), q = fmax(c->fractions[k], SHARE_FLOOR);
        psi += (p - q) * log(p / q);
    }
    return psi;
}
