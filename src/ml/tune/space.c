/* The search space of a tune stage: parsing from a value tree (with file
 * positions in errors), conditional activity, and converting points to and
 * from value mappings. Sampling lives in sampler.c. */
#include "tune_int.h"

#include <math.h>
#include <string.h>

static mr_status bad(mr_error *err, const char *file, const mr_value *at, const char *fmt, const char *name,
                     const char *what)
{
    mr_status rc = MR_ERR(err, MR_E_SCHEMA, fmt, name, what);
    mr_error_at(err, file, at ? at->line : 0, at ? at->col : 0);
    return rc;
}

static int num_of(const mr_value *v, double *out)
{
    if (v->kind == MR_V_INT) *out = (double)v->u.i;
    else if (v->kind == MR_V_FLOAT) *out = v->u.f;
    else return 0;
    return isfinite(*out);
}

void mr_tune_space_free(mr_tune_space *s)
{
    if (!s) return;
    for (size_t j = 0; j < s->n; j++) {
        mr__tune_param *p = &s->p[j];
        mr_free(p->name);
        for (size_t k = 0; k < p->n_choices; k++) mr_value_free(p->choices[k]);
        mr_free(p->choices);
        mr_free(p->when_idx);
    }
    mr_free(s->p);
    mr_free(s->order);
    mr_free(s);
}

static ssize_t param_index(const mr_tune_space *s, const char *name)
{
    for (size_t j = 0; j < s->n; j++)
        if (!strcmp(s->p[j].name, name)) return (ssize_t)j;
    return -1;
}

static ssize_t choice_index(const mr__tune_param *p, const mr_value *v)
{
    for (size_t k = 0; k < p->n_choices; k++)
        if (mr_value_equal(p->choices[k], v)) return (ssize_t)k;
    /* "when: {n: 3}" may name a float option 3.0 and the reverse. */
    double a, b;
    for (size_t k = 0; k < p->n_choices; k++)
        if (num_of(v, &a) && num_of(p->choices[k], &b) && a == b) return (ssize_t)k;
    return -1;
}

static mr_status parse_when(mr_tune_space *s, mr__tune_param *p, const mr_value *when, const char *file, mr_error *err)
{
    if (when->kind != MR_V_MAP || when->n != 1)
        return bad(err, file, when, "space.%s: 'when' must map one earlier choice parameter to its value(s)%s", p->name, "");
    ssize_t parent = param_index(s, when->keys[0]);
    if (parent < 0 || parent == (ssize_t)(p - s->p)) {
        mr_status rc = MR_ERR(err, MR_E_SCHEMA, "space.%s: 'when' names '%s', which is not another parameter", p->name,
                              when->keys[0]);
        mr_error_at(err, file, when->key_lines[0], when->key_cols[0]);
        const char **names = mr_calloc(s->n, sizeof(*names));
        for (size_t k = 0; names && k < s->n; k++) names[k] = s->p[k].name;
        const char *best = names ? mr_closest(when->keys[0], names, s->n) : NULL;
        if (best) mr_error_hint(err, "did you mean '%s'?", best);
        mr_free(names);
        return rc;
    }
    mr__tune_param *pp = &s->p[parent];
    if (pp->kind != MR_TUNE_CHOICE)
        return bad(err, file, when, "space.%s: 'when' must name a choice parameter, '%s' is not one", p->name, pp->name);
    const mr_value *vals = when->items[0];
    size_t nv = vals->kind == MR_V_SEQ ? vals->n : 1;
    p->when_parent = (int)parent;
    p->when_idx = mr_calloc(nv ? nv : 1, sizeof(*p->when_idx));
    if (!p->when_idx) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t k = 0; k < nv; k++) {
        const mr_value *v = vals->kind == MR_V_SEQ ? vals->items[k] : vals;
        ssize_t ci = choice_index(pp, v);
        if (ci < 0) {
            mr_buf t;
            mr_buf_init(&t);
            mr_value_scalar_text(v, &t);
            mr_status rc = bad(err, file, v, "space.%s: 'when' value '%s' is not an option of the parent", p->name,
                               t.data ? t.data : "?");
            mr_buf_free(&t);
            return rc;
        }
        p->when_idx[p->n_when++] = (int)ci;
    }
    return MR_OK;
}

static mr_status parse_param(mr_tune_space *s, mr__tune_param *p, const mr_value *spec, const char *file, mr_error *err)
{
    static const char *const kinds[] = {"uniform", "loguniform", "int", "choice"};
    (void)s;
    if (spec->kind != MR_V_MAP)
        return bad(err, file, spec, "space.%s: expected a mapping such as {uniform: [0, 1]}, got %s", p->name,
                   mr_vkind_name(spec->kind));
    const mr_value *range = NULL;
    for (size_t k = 0; k < spec->n; k++) {
        const char *key = spec->keys[k];
        const mr_value *v = spec->items[k];
        int kind = 0;
        for (int q = 0; q < 4; q++)
            if (!strcmp(key, kinds[q])) kind = q + 1;
        if (kind) {
            if (p->kind) {
                mr_status rc = MR_ERR(err, MR_E_SCHEMA, "space.%s: more than one distribution ('%s')", p->name, key);
                mr_error_at(err, file, spec->key_lines[k], spec->key_cols[k]);
                return rc;
            }
            p->kind = (mr_tune_kind)kind;
            range = v;
        } else if (!strcmp(key, "when")) {
            continue; /* after the kind: parents are checked below */
        } else if (!strcmp(key, "log")) {
            if (v->kind != MR_V_BOOL) return bad(err, file, v, "space.%s: 'log' must be true or false%s", p->name, "");
            p->log = v->u.b;
        } else {
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "space.%s: unknown key '%s'", p->name, key);
            mr_error_at(err, file, spec->key_lines[k], spec->key_cols[k]);
            const char *cands[] = {"uniform", "loguniform", "int", "choice", "when", "log"};
            const char *best = mr_closest(key, cands, 6);
            if (best) mr_error_hint(err, "did you mean '%s'?", best);
            else mr_error_hint(err, "use one of uniform, loguniform, int, choice (and optionally when)");
            return rc;
        }
    }
    if (!p->kind) {
        mr_status rc = bad(err, file, spec, "space.%s: no distribution given%s", p->name, "");
        mr_error_hint(err, "write {uniform: [lo, hi]}, {loguniform: [lo, hi]}, {int: [lo, hi]} or {choice: [a, b]}");
        return rc;
    }
    if (p->kind == MR_TUNE_CHOICE) {
        if (range->kind != MR_V_SEQ || range->n == 0)
            return bad(err, file, range, "space.%s: choice needs a non-empty list of options%s", p->name, "");
        p->choices = mr_calloc(range->n, sizeof(*p->choices));
        if (!p->choices) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t k = 0; k < range->n; k++) {
            const mr_value *o = range->items[k];
            if (o->kind == MR_V_MAP || o->kind == MR_V_SEQ || o->kind == MR_V_NULL)
                return bad(err, file, o, "space.%s: a choice option must be a string, number or bool, got %s", p->name,
                           mr_vkind_name(o->kind));
            for (size_t q = 0; q < k; q++)
                if (mr_value_equal(p->choices[q], o))
                    return bad(err, file, o, "space.%s: option listed twice%s", p->name, "");
            p->choices[k] = mr_value_clone(o);
            if (!p->choices[k]) return MR_ERR(err, MR_E_NOMEM, "out of memory");
            p->n_choices++;
        }
        p->lo = 0;
        p->hi = (double)(p->n_choices - 1);
    } else {
        if (range->kind != MR_V_SEQ || range->n != 2 || !num_of(range->items[0], &p->lo) || !num_of(range->items[1], &p->hi))
            return bad(err, file, range, "space.%s: expected [low, high] (two numbers) for %s", p->name, kinds[p->kind - 1]);
        if (p->kind == MR_TUNE_INT && (range->items[0]->kind != MR_V_INT || range->items[1]->kind != MR_V_INT))
            return bad(err, file, range, "space.%s: int bounds must be integers%s", p->name, "");
        if (!(p->lo < p->hi) && !(p->kind == MR_TUNE_INT && p->lo == p->hi))
            return bad(err, file, range, "space.%s: low must be below high%s", p->name, "");
        if (p->kind == MR_TUNE_LOGUNIFORM) p->log = 1;
        if (p->log && p->lo <= 0)
            return bad(err, file, range, "space.%s: a log scale needs low > 0%s", p->name, "");
    }
    p->when_parent = -1;
    return MR_OK;
}

mr_status mr_tune_space_parse(const mr_value *v, const char *file, mr_tune_space **out, mr_error *err)
{
    *out = NULL;
    if (!v || v->kind != MR_V_MAP || v->n == 0) {
        mr_status rc = MR_ERR(err, MR_E_SCHEMA, "space: expected a mapping of parameter -> distribution, got %s",
                              v ? mr_vkind_name(v->kind) : "nothing");
        if (v) mr_error_at(err, file, v->line, v->col);
        mr_error_hint(err, "space: {learning_rate: {loguniform: [0.01, 0.3]}, num_leaves: {int: [15, 255]}}");
        return rc;
    }
    mr_tune_space *s = mr_calloc(1, sizeof(*s));
    mr_status rc = MR_OK;
    if (!s || !(s->p = mr_calloc(v->n, sizeof(*s->p)))) {
        mr_free(s);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (size_t j = 0; j < v->n && rc == MR_OK; j++) {
        s->p[j].when_parent = -1;
        s->p[j].name = mr_strdup(v->keys[j]);
        s->n++;
        rc = s->p[j].name ? parse_param(s, &s->p[j], v->items[j], file, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    /* Conditions, once every name is known (a mapping's order may be lost
     * on the way, e.g. through a job file with sorted keys). */
    for (size_t j = 0; j < v->n && rc == MR_OK; j++) {
        const mr_value *when = mr_value_get(v->items[j], "when");
        if (when) rc = parse_when(s, &s->p[j], when, file, err);
    }
    /* Sampling order: parents before children; a cycle is an error. */
    if (rc == MR_OK && !(s->order = mr_calloc(s->n, sizeof(size_t)))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        char *placed = mr_calloc(s->n, 1);
        size_t k = 0;
        int progress = 1;
        while (placed && k < s->n && progress) {
            progress = 0;
            for (size_t j = 0; j < s->n; j++) {
                int par = s->p[j].when_parent;
                if (placed[j] || (par >= 0 && !placed[par])) continue;
                placed[j] = 1;
                s->order[k++] = j;
                progress = 1;
            }
        }
        if (!placed) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        else if (k < s->n) {
            size_t j = 0;
            while (placed[j]) j++;
            rc = bad(err, file, v->items[j], "space.%s: its 'when' conditions form a cycle%s", s->p[j].name, "");
        }
        mr_free(placed);
    }
    if (rc != MR_OK) {
        mr_tune_space_free(s);
        return rc;
    }
    *out = s;
    return MR_OK;
}

size_t mr_tune_space_size(const mr_tune_space *s) { return s ? s->n : 0; }
const char *mr_tune_space_name(const mr_tune_space *s, size_t j) { return s->p[j].name; }
mr_tune_kind mr_tune_space_kind(const mr_tune_space *s, size_t j) { return s->p[j].kind; }
size_t mr_tune_space_n_choices(const mr_tune_space *s, size_t j) { return s->p[j].n_choices; }

int mr_tune_space_active(const mr_tune_space *s, size_t j, const double *x)
{
    const mr__tune_param *p = &s->p[j];
    if (p->when_parent < 0) return 1;
    double pv = x[p->when_parent];
    if (isnan(pv)) return 0;
    for (size_t k = 0; k < p->n_when; k++)
        if ((double)p->when_idx[k] == pv) return 1;
    return 0;
}

mr_status mr_tune_point_value(const mr_tune_space *s, const double *x, mr_value **out)
{
    mr_value *m = mr_value_new(MR_V_MAP);
    if (!m) return MR_E_NOMEM;
    for (size_t j = 0; j < s->n; j++) {
        const mr__tune_param *p = &s->p[j];
        if (isnan(x[j])) continue;
        mr_value *v;
        if (p->kind == MR_TUNE_CHOICE) v = mr_value_clone(p->choices[(size_t)x[j]]);
        else if (p->kind == MR_TUNE_INT) v = mr_value_new_int((int64_t)llround(x[j]));
        else v = mr_value_new_float(x[j]);
        if (mr_value_map_set(m, p->name, v) != MR_OK) {
            mr_value_free(m);
            return MR_E_NOMEM;
        }
    }
    *out = m;
    return MR_OK;
}

mr_status mr_tune_point_from_value(const mr_tune_space *s, const mr_value *map, double *x, mr_error *err)
{
    for (size_t j = 0; j < s->n; j++) {
        const mr__tune_param *p = &s->p[j];
        const mr_value *v = mr_value_get(map, p->name);
        x[j] = NAN;
        if (!v) continue;
        if (p->kind == MR_TUNE_CHOICE) {
            ssize_t ci = choice_index(p, v);
            if (ci < 0) return MR_ERR(err, MR_E_NOT_FOUND, "%s: value is not an option of the space", p->name);
            x[j] = (double)ci;
        } else if (!num_of(v, &x[j]) || x[j] < p->lo || x[j] > p->hi) {
            return MR_ERR(err, MR_E_NOT_FOUND, "%s: value outside the space", p->name);
        }
    }
    return MR_OK;
}
