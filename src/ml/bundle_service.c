/* The feature service section of a bundle (include/millrace/bundle.h,
 * "the feature service"): the JSON the package stage writes, parsed and
 * checked against the bundle's inputs by the writer (nothing a loader
 * refuses is written) and by every loader. */
#include "ml/bundle_int.h"

#include <jansson.h>
#include <string.h>

struct mr__bundle_service_doc {
    json_t *doc; /* owns every string the service borrows */
    mr_bundle_service s;
    mr_bundle_service_store *stores;
    const char **key_names; /* every store's, end to end */
    mr_dtype *key_types;
    mr_bundle_service_feature *features;
};

void mr__bundle_service_free(mr__bundle_service_doc *d)
{
    if (!d) return;
    json_decref(d->doc);
    mr_free(d->stores);
    mr_free(d->key_names);
    mr_free(d->key_types);
    mr_free(d->features);
    mr_free(d);
}

const mr_bundle_service *mr__bundle_service_get(const mr__bundle_service_doc *d) { return d ? &d->s : NULL; }

static mr_status bad(mr_error *err, const char *what) { return MR_ERR(err, MR_E_PARSE, "%s", what); }

/* A "name"/"type" member pair of o: the name a non-empty string, the type a dtype name. */
static mr_status name_type(const json_t *o, const char *what, const char **name, mr_dtype *type, mr_error *err)
{
    const json_t *n = json_object_get(o, "name"), *t = json_object_get(o, "type");
    if (!json_is_object(o) || !json_is_string(n) || !json_string_length(n) || !json_is_string(t))
        return MR_ERR(err, MR_E_PARSE, "each of \"%s\" must be an object with a \"name\" and a \"type\"", what);
    if (mr_dtype_parse(json_string_value(t), type) != MR_OK || *type == MR_T_NULL)
        return MR_ERR(err, MR_E_PARSE, "\"%s\" '%s': unknown type \"%s\"", what, json_string_value(n),
                      json_string_value(t));
    *name = json_string_value(n);
    return MR_OK;
}

/* A default value as a cell, checked against the input's column type. */
static mr_status default_cell(const json_t *v, const mr_bundle_input *in, mr_cell *c, mr_error *err)
{
    memset(c, 0, sizeof(*c));
    if (!v || json_is_null(v)) return MR_OK;
    mr_dtype ct = mr_bundle_input_column_type(in);
    int ok = 0;
    if (ct == MR_T_FLOAT64 && json_is_number(v)) {
        c->kind = MR_CELL_NUM;
        c->num = json_number_value(v);
        ok = 1;
    } else if (ct == MR_T_FLOAT64 && json_is_boolean(v)) {
        c->kind = MR_CELL_NUM;
        c->num = json_is_true(v) ? 1.0 : 0.0;
        ok = 1;
    } else if (ct == MR_T_INT64 && json_is_integer(v)) {
        c->kind = MR_CELL_INT;
        c->i = (int64_t)json_integer_value(v);
        ok = 1;
    } else if (ct == MR_T_BOOL && json_is_boolean(v)) {
        c->kind = MR_CELL_BOOL;
        c->i = json_is_true(v);
        ok = 1;
    } else if (ct == MR_T_STRING && json_is_string(v)) {
        c->kind = MR_CELL_STR;
        c->str = json_string_value(v);
        c->len = json_string_length(v);
        ok = 1;
    }
    if (!ok)
        return MR_ERR(err, MR_E_PARSE, "feature '%s': the default must be %s", in->name,
                      ct == MR_T_FLOAT64 ? "a number" : ct == MR_T_INT64 ? "an integer"
                                                   : ct == MR_T_BOOL ? "true or false" : "a string");
    return MR_OK;
}

mr_status mr__bundle_service_parse(const char *text, size_t len, const mr_bundle_input *in, size_t n_in,
                                   mr__bundle_service_doc **out, mr_error *err)
{
    *out = NULL;
    mr__bundle_service_doc *d = mr_calloc(1, sizeof(*d));
    if (!d) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    d->doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    mr_status rc = mr_alloc_failures_here() != oom0 ? MR_ERR(err, MR_E_NOMEM, "out of memory") : MR_OK;
    const json_t *stores = json_object_get(d->doc, "stores"), *feats = json_object_get(d->doc, "features");
    const json_t *missing = json_object_get(d->doc, "missing");
    if (rc == MR_OK) {
        if (!d->doc) rc = MR_ERR(err, MR_E_PARSE, "not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
        else if (!json_is_object(d->doc)) rc = bad(err, "not a JSON object");
        else if (!json_is_array(stores) || !json_array_size(stores)) rc = bad(err, "\"stores\" must be a non-empty list");
        else if (!json_is_array(feats) || !json_array_size(feats)) rc = bad(err, "\"features\" must be a non-empty list");
        else if (missing && (!json_is_string(missing) || (strcmp(json_string_value(missing), "default") &&
                                                          strcmp(json_string_value(missing), "reject"))))
            rc = bad(err, "\"missing\" must be \"default\" or \"reject\"");
    }
    size_t ns = rc == MR_OK ? json_array_size(stores) : 0, nf = rc == MR_OK ? json_array_size(feats) : 0, nk = 0;
    for (size_t i = 0; rc == MR_OK && i < ns; i++) {
        const json_t *st = json_array_get(stores, i), *keys = json_object_get(st, "keys");
        const json_t *where = json_object_get(st, "store");
        if (!json_is_object(st) || !json_is_array(keys) || !json_array_size(keys))
            rc = MR_ERR(err, MR_E_PARSE, "store %zu: \"keys\" must be a non-empty list", i);
        else if (where && !json_is_string(where)) rc = MR_ERR(err, MR_E_PARSE, "store %zu: \"store\" must be a path", i);
        else nk += json_array_size(keys);
    }
    if (rc == MR_OK) {
        d->stores = mr_calloc(ns, sizeof(*d->stores));
        d->key_names = mr_calloc(nk, sizeof(*d->key_names));
        d->key_types = mr_calloc(nk, sizeof(*d->key_types));
        d->features = mr_calloc(nf, sizeof(*d->features));
        if (!d->stores || !d->key_names || !d->key_types || !d->features) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t i = 0, at = 0; rc == MR_OK && i < ns; i++) {
        const json_t *st = json_array_get(stores, i), *keys = json_object_get(st, "keys");
        const json_t *where = json_object_get(st, "store");
        mr_bundle_service_store *x = &d->stores[i];
        x->store = where ? json_string_value(where) : NULL;
        x->n_keys = json_array_size(keys);
        x->key_names = d->key_names + at;
        x->key_types = d->key_types + at;
        for (size_t k = 0; rc == MR_OK && k < x->n_keys; k++, at++) {
            rc = name_type(json_array_get(keys, k), "keys", &d->key_names[at], &d->key_types[at], err);
            for (size_t j = 0; rc == MR_OK && j < k; j++)
                if (!strcmp(x->key_names[j], x->key_names[k]))
                    rc = MR_ERR(err, MR_E_PARSE, "key '%s' is named twice", x->key_names[k]);
        }
    }
    for (size_t f = 0; rc == MR_OK && f < nf; f++) {
        const json_t *o = json_array_get(feats, f), *view = json_object_get(o, "view"), *st = json_object_get(o, "store");
        mr_bundle_service_feature *x = &d->features[f];
        rc = name_type(o, "features", &x->name, &x->type, err);
        if (rc == MR_OK && !json_is_string(view))
            rc = MR_ERR(err, MR_E_PARSE, "feature '%s' has no \"view\"", x->name);
        if (rc == MR_OK && (!json_is_integer(st) || json_integer_value(st) < 0 || (size_t)json_integer_value(st) >= ns))
            rc = MR_ERR(err, MR_E_PARSE, "feature '%s': \"store\" must be the index of one of the %zu stores", x->name, ns);
        if (rc != MR_OK) break;
        x->view = json_string_value(view);
        x->store = (size_t)json_integer_value(st);
        size_t i = 0;
        while (i < n_in && strcmp(in[i].name, x->name)) i++;
        if (i == n_in) {
            rc = MR_ERR(err, MR_E_PARSE, "feature '%s' is no input of the bundle", x->name);
            break;
        }
        x->input = i;
        for (size_t j = 0; rc == MR_OK && j < f; j++)
            if (d->features[j].input == i) rc = MR_ERR(err, MR_E_PARSE, "feature '%s' is named twice", x->name);
        for (size_t k = 0; rc == MR_OK && k < nk; k++)
            if (!strcmp(d->key_names[k], x->name))
                rc = MR_ERR(err, MR_E_PARSE, "'%s' is both a key and a feature", x->name);
        if (rc == MR_OK) rc = default_cell(json_object_get(o, "default"), &in[i], &x->dflt, err);
    }
    if (rc != MR_OK) {
        mr__bundle_service_free(d);
        return rc;
    }
    d->s.reject_missing = missing && !strcmp(json_string_value(missing), "reject");
    d->s.n_stores = ns;
    d->s.stores = d->stores;
    d->s.n_features = nf;
    d->s.features = d->features;
    *out = d;
    return MR_OK;
}
