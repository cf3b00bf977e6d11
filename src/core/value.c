/* The mr_value tree: construction, YAML 1.2 core-schema scalar resolution,
 * path lookup, canonical JSON, structural equality and "did you mean" help.
 * Parsing YAML text lives in yaml.c; spec validation in spec.c. */
#include "millrace/value.h"

#include <ctype.h>
#include <jansson.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *mr_vkind_name(mr_vkind k)
{
    switch (k) {
    case MR_V_NULL: return "null";
    case MR_V_BOOL: return "bool";
    case MR_V_INT: return "int";
    case MR_V_FLOAT: return "float";
    case MR_V_STR: return "string";
    case MR_V_MAP: return "mapping";
    case MR_V_SEQ: return "list";
    }
    return "unknown";
}

/* ---- construction ------------------------------------------------------ */

mr_value *mr_value_new(mr_vkind kind)
{
    mr_value *v = mr_calloc(1, sizeof(*v));
    if (v) v->kind = kind;
    return v;
}

mr_value *mr_value_new_str(const char *s)
{
    mr_value *v = mr_value_new(MR_V_STR);
    if (!v) goto done;
    v->str = mr_strdup(s ? s : "");
    if (!v->str) {
        mr_free(v);
        v = NULL;
    }
done:
    return v;
}

mr_value *mr_value_new_int(int64_t i)
{
    mr_value *v = mr_value_new(MR_V_INT);
    if (v) v->u.i = i;
    return v;
}

mr_value *mr_value_new_float(double f)
{
    mr_value *v = mr_value_new(MR_V_FLOAT);
    if (v) v->u.f = f;
    return v;
}

mr_value *mr_value_new_bool(int b)
{
    mr_value *v = mr_value_new(MR_V_BOOL);
    if (v) v->u.b = b ? 1 : 0;
    return v;
}

void mr_value_free(mr_value *v)
{
    if (!v) return;
    for (size_t i = 0; i < v->n; i++) {
        if (v->keys) mr_free(v->keys[i]);
        mr_value_free(v->items[i]);
    }
    mr_free(v->keys);
    mr_free(v->key_lines);
    mr_free(v->key_cols);
    mr_free(v->items);
    mr_free(v->str);
    mr_free(v);
}

/* Makes room for one more entry in a MAP or SEQ. */
static mr_status grow(mr_value *v)
{
    mr_status st = MR_OK;
    if (v->n < v->cap) goto done;
    size_t ncap = v->cap ? v->cap * 2 : 4;
    mr_value **items = mr_realloc(v->items, ncap * sizeof(*items));
    if (!items) {
        st = MR_E_NOMEM;
        goto done;
    }
    v->items = items;
    if (v->kind == MR_V_MAP) {
        char **keys = mr_realloc(v->keys, ncap * sizeof(*keys));
        if (keys) v->keys = keys;
        long *kl = keys ? mr_realloc(v->key_lines, ncap * sizeof(*kl)) : NULL;
        if (kl) v->key_lines = kl;
        long *kc = kl ? mr_realloc(v->key_cols, ncap * sizeof(*kc)) : NULL;
        if (kc) v->key_cols = kc;
        if (!kc) {
            st = MR_E_NOMEM;
            goto done;
        }
    }
    v->cap = ncap;
done:
    return st;
}

mr_value *mr_value_clone(const mr_value *v)
{
    mr_value *c = NULL;
    if (!v) goto done;
    c = mr_value_new(v->kind);
    if (!c) goto done;
    c->line = v->line;
    c->col = v->col;
    c->u = v->u;
    if (v->str) {
        c->str = mr_strdup(v->str);
        if (!c->str) goto fail;
    }
    for (size_t i = 0; i < v->n; i++) {
        if (grow(c) != MR_OK) goto fail;
        mr_value *item = mr_value_clone(v->items[i]);
        if (!item) goto fail;
        if (v->kind == MR_V_MAP) {
            char *k = mr_strdup(v->keys[i]);
            if (!k) {
                mr_value_free(item);
                goto fail;
            }
            c->keys[c->n] = k;
            c->key_lines[c->n] = v->key_lines[i];
            c->key_cols[c->n] = v->key_cols[i];
        }
        c->items[c->n++] = item;
    }
    goto done;
fail:
    mr_value_free(c);
    c = NULL;
done:
    return c;
}

/* ---- scalar resolution (YAML 1.2 core schema) -------------------------- */

static int is_one_of(const char *s, const char *const *words)
{
    for (size_t i = 0; words[i]; i++)
        if (!strcmp(s, words[i])) return 1;
    return 0;
}

/* Parses [-+]?[0-9]+ | 0o[0-7]+ | 0x[0-9a-fA-F]+. Returns 1 on a match that
 * fits int64, 2 on a decimal match that overflows, 0 on no match. */
static int parse_int(const char *s, int64_t *out)
{
    int ret = 0;
    int base = 10;
    int neg = 0;
    const char *p = s;
    if (p[0] == '0' && (p[1] == 'x' || p[1] == 'o')) {
        base = p[1] == 'x' ? 16 : 8;
        p += 2;
    } else if (*p == '-' || *p == '+') {
        neg = *p == '-';
        p++;
    }
    if (!*p) goto done;
    uint64_t acc = 0;
    int overflow = 0;
    uint64_t lim = neg ? (uint64_t)INT64_MAX + 1u : (uint64_t)INT64_MAX;
    for (; *p; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (base == 16 && *p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (base == 16 && *p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            goto done;
        if (d >= base) goto done;
        if (acc > (lim - (uint64_t)d) / (uint64_t)base)
            overflow = 1;
        else
            acc = acc * (uint64_t)base + (uint64_t)d;
    }
    if (overflow) {
        ret = base == 10 ? 2 : 0;
        goto done;
    }
    if (neg)
        *out = acc == (uint64_t)INT64_MAX + 1u ? INT64_MIN : -(int64_t)acc;
    else
        *out = (int64_t)acc;
    ret = 1;
done:
    return ret;
}

/* [-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)? */
static int is_float_text(const char *s)
{
    const char *p = s;
    size_t n_int = 0, n_frac = 0, n_exp = 1;
    if (*p == '-' || *p == '+') p++;
    for (; isdigit((unsigned char)*p); p++) n_int++;
    if (*p == '.')
        for (p++; isdigit((unsigned char)*p); p++) n_frac++;
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-' || *p == '+') p++;
        for (n_exp = 0; isdigit((unsigned char)*p); p++) n_exp++;
    }
    return (n_int || n_frac) && n_exp && *p == '\0';
}

mr_value *mr_value_from_scalar(const char *text, int quoted)
{
    static const char *const nulls[] = {"", "~", "null", "Null", "NULL", NULL};
    static const char *const trues[] = {"true", "True", "TRUE", NULL};
    static const char *const falses[] = {"false", "False", "FALSE", NULL};
    static const char *const pinfs[] = {".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", NULL};
    static const char *const ninfs[] = {"-.inf", "-.Inf", "-.INF", NULL};
    static const char *const nans[] = {".nan", ".NaN", ".NAN", NULL};
    mr_value *v = NULL;
    int64_t i = 0;
    if (!text) text = "";
    if (quoted) {
        v = mr_value_new_str(text);
        goto done;
    }
    int ik = parse_int(text, &i);
    if (is_one_of(text, nulls))
        v = mr_value_new(MR_V_NULL);
    else if (is_one_of(text, trues))
        v = mr_value_new_bool(1);
    else if (is_one_of(text, falses))
        v = mr_value_new_bool(0);
    else if (ik == 1)
        v = mr_value_new_int(i);
    else if (ik == 2 || is_float_text(text))
        v = mr_value_new_float(strtod(text, NULL));
    else if (is_one_of(text, pinfs))
        v = mr_value_new_float(INFINITY);
    else if (is_one_of(text, ninfs))
        v = mr_value_new_float(-INFINITY);
    else if (is_one_of(text, nans))
        v = mr_value_new_float(NAN);
    else {
        v = mr_value_new_str(text);
        goto done;
    }
    if (v) {
        v->str = mr_strdup(text);
        if (!v->str) {
            mr_value_free(v);
            v = NULL;
        }
    }
done:
    return v;
}

/* ---- lookup and mutation ----------------------------------------------- */

static long map_index(const mr_value *map, const char *key, size_t key_len)
{
    long idx = -1;
    if (!map || map->kind != MR_V_MAP) goto done;
    for (size_t i = 0; i < map->n; i++) {
        if (strlen(map->keys[i]) == key_len && !memcmp(map->keys[i], key, key_len)) {
            idx = (long)i;
            break;
        }
    }
done:
    return idx;
}

mr_value *mr_value_get(const mr_value *map, const char *key)
{
    long i = key ? map_index(map, key, strlen(key)) : -1;
    return i < 0 ? NULL : map->items[i];
}

mr_value *mr_value_get_path(const mr_value *root, const char *path)
{
    const mr_value *cur = root;
    const char *p = path;
    if (!path || !*path) {
        cur = NULL;
        goto done;
    }
    while (cur) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        long i = map_index(cur, p, len);
        cur = i < 0 ? NULL : cur->items[i];
        if (!dot) break;
        p = dot + 1;
    }
done:
    return (mr_value *)cur;
}

mr_status mr_value_map_set(mr_value *map, const char *key, mr_value *val)
{
    mr_status st = MR_OK;
    if (!map || map->kind != MR_V_MAP || !key || !val) {
        st = val ? MR_E_INVALID_ARG : MR_E_NOMEM; /* NULL val: a failed constructor */
        goto fail;
    }
    long i = map_index(map, key, strlen(key));
    if (i >= 0) {
        mr_value_free(map->items[i]);
        map->items[i] = val;
        goto done;
    }
    char *k = mr_strdup(key);
    st = k ? grow(map) : MR_E_NOMEM;
    if (st != MR_OK) {
        mr_free(k);
        goto fail;
    }
    map->keys[map->n] = k;
    map->key_lines[map->n] = 0;
    map->key_cols[map->n] = 0;
    map->items[map->n++] = val;
    goto done;
fail:
    mr_value_free(val);
done:
    return st;
}

mr_status mr_value_seq_push(mr_value *seq, mr_value *val)
{
    mr_status st = MR_OK;
    if (!seq || seq->kind != MR_V_SEQ || !val) st = val ? MR_E_INVALID_ARG : MR_E_NOMEM;
    if (st == MR_OK) st = grow(seq);
    if (st == MR_OK)
        seq->items[seq->n++] = val;
    else
        mr_value_free(val);
    return st;
}

mr_status mr_value_set_path(mr_value *root, const char *path, mr_value *val)
{
    mr_status st = MR_OK;
    char *key = NULL;
    mr_value *cur = root;
    const char *p = path;
    if (!root || root->kind != MR_V_MAP || !path || !*path || !val) {
        st = val ? MR_E_INVALID_ARG : MR_E_NOMEM;
        goto fail;
    }
    for (;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        if (!len) {
            st = MR_E_INVALID_ARG;
            goto fail;
        }
        key = mr_strndup(p, len);
        if (!key) {
            st = MR_E_NOMEM;
            goto fail;
        }
        if (!dot) break;
        mr_value *next = mr_value_get(cur, key);
        if (!next) {
            next = mr_value_new(MR_V_MAP);
            st = mr_value_map_set(cur, key, next); /* MR_E_NOMEM if next is NULL */
            if (st != MR_OK) goto fail;
        } else if (next->kind != MR_V_MAP) {
            st = MR_E_INVALID_ARG;
            goto fail;
        }
        mr_free(key);
        key = NULL;
        cur = next;
        p = dot + 1;
    }
    st = mr_value_map_set(cur, key, val);
    val = NULL; /* owned by the map now, even on failure */
fail:
    mr_free(key);
    mr_value_free(val);
    return st;
}

/* ---- text forms -------------------------------------------------------- */

/* Shortest "%.{15,16,17}g" text that reads back as d, always with a '.' or
 * an exponent so it stays a float ("1.0", "1e+20"). d must be finite. */
static void format_double(double d, char *buf, size_t buf_len)
{
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(buf, buf_len, "%.*g", prec, d);
        if (strtod(buf, NULL) == d) break;
    }
    if (!strpbrk(buf, ".eEn")) {
        size_t n = strlen(buf);
        snprintf(buf + n, buf_len - n, ".0");
    }
}

static mr_status scalar_text(const mr_value *v, mr_buf *out)
{
    char num[64];
    mr_status st = MR_OK;
    switch (v->kind) {
    case MR_V_NULL: st = mr_buf_puts(out, "null"); break;
    case MR_V_BOOL: st = mr_buf_puts(out, v->u.b ? "true" : "false"); break;
    case MR_V_INT: st = mr_buf_printf(out, "%" PRId64, v->u.i); break;
    case MR_V_FLOAT:
        if (isnan(v->u.f))
            st = mr_buf_puts(out, "nan");
        else if (isinf(v->u.f))
            st = mr_buf_puts(out, v->u.f < 0 ? "-inf" : "inf");
        else {
            format_double(v->u.f, num, sizeof(num));
            st = mr_buf_puts(out, num);
        }
        break;
    case MR_V_STR: st = mr_buf_puts(out, v->str ? v->str : ""); break;
    case MR_V_MAP:
    case MR_V_SEQ: st = MR_E_INVALID_ARG; break;
    }
    return st;
}

mr_status mr_value_scalar_text(const mr_value *v, mr_buf *out)
{
    return v ? scalar_text(v, out) : MR_E_INVALID_ARG;
}

/* Insertion sort of key indices (maps are small; avoids qsort's lack of a
 * context pointer in C11). */
static void sort_keys(const mr_value *map, size_t *idx)
{
    for (size_t i = 0; i < map->n; i++) idx[i] = i;
    for (size_t i = 1; i < map->n; i++) {
        size_t cur = idx[i];
        size_t j = i;
        while (j > 0 && strcmp(map->keys[idx[j - 1]], map->keys[cur]) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = cur;
    }
}

void mr_value_sort_keys(mr_value *v)
{
    if (!v || (v->kind != MR_V_MAP && v->kind != MR_V_SEQ)) return;
    for (size_t i = 0; i < v->n; i++) mr_value_sort_keys(v->items[i]);
    if (v->kind != MR_V_MAP) return;
    /* insertion sort, moving all four parallel arrays together (stable) */
    for (size_t i = 1; i < v->n; i++) {
        char *k = v->keys[i];
        mr_value *it = v->items[i];
        long kl = v->key_lines[i], kc = v->key_cols[i];
        size_t j = i;
        while (j > 0 && strcmp(v->keys[j - 1], k) > 0) {
            v->keys[j] = v->keys[j - 1];
            v->items[j] = v->items[j - 1];
            v->key_lines[j] = v->key_lines[j - 1];
            v->key_cols[j] = v->key_cols[j - 1];
            j--;
        }
        v->keys[j] = k;
        v->items[j] = it;
        v->key_lines[j] = kl;
        v->key_cols[j] = kc;
    }
}

static mr_status to_json(const mr_value *v, int canonical, mr_buf *out)
{
    mr_status st = MR_OK;
    size_t *idx = NULL;
    switch (v->kind) {
    case MR_V_STR: st = mr_buf_json_str(out, v->str ? v->str : ""); break;
    case MR_V_FLOAT:
        if (isnan(v->u.f) || isinf(v->u.f)) {
            st = mr_buf_json_str(out, isnan(v->u.f) ? "nan" : v->u.f < 0 ? "-inf" : "inf");
            break;
        }
        st = scalar_text(v, out);
        break;
    case MR_V_NULL:
    case MR_V_BOOL:
    case MR_V_INT: st = scalar_text(v, out); break;
    case MR_V_SEQ:
        st = mr_buf_puts(out, "[");
        for (size_t i = 0; st == MR_OK && i < v->n; i++) {
            if (i) st = mr_buf_puts(out, ",");
            if (st == MR_OK) st = to_json(v->items[i], canonical, out);
        }
        if (st == MR_OK) st = mr_buf_puts(out, "]");
        break;
    case MR_V_MAP:
        idx = mr_calloc(v->n ? v->n : 1, sizeof(*idx));
        if (!idx) {
            st = MR_E_NOMEM;
            break;
        }
        for (size_t i = 0; i < v->n; i++) idx[i] = i;
        if (canonical) sort_keys(v, idx);
        st = mr_buf_puts(out, "{");
        for (size_t i = 0; st == MR_OK && i < v->n; i++) {
            if (i) st = mr_buf_puts(out, ",");
            if (st == MR_OK) st = mr_buf_json_str(out, v->keys[idx[i]]);
            if (st == MR_OK) st = mr_buf_puts(out, ":");
            if (st == MR_OK) st = to_json(v->items[idx[i]], canonical, out);
        }
        if (st == MR_OK) st = mr_buf_puts(out, "}");
        break;
    }
    mr_free(idx);
    return st;
}

mr_status mr_value_to_json(const mr_value *v, int canonical, mr_buf *out)
{
    return v ? to_json(v, canonical, out) : mr_buf_puts(out, "null");
}

int mr_value_equal(const mr_value *a, const mr_value *b)
{
    int eq = 0;
    if (!a || !b) {
        eq = a == b;
        goto done;
    }
    if (a->kind != b->kind) goto done;
    switch (a->kind) {
    case MR_V_NULL: eq = 1; break;
    case MR_V_BOOL: eq = !a->u.b == !b->u.b; break;
    case MR_V_INT: eq = a->u.i == b->u.i; break;
    case MR_V_FLOAT:
        eq = a->u.f == b->u.f || (isnan(a->u.f) && isnan(b->u.f));
        if (eq && a->u.f == 0.0) eq = !signbit(a->u.f) == !signbit(b->u.f);
        break;
    case MR_V_STR: eq = !strcmp(a->str ? a->str : "", b->str ? b->str : ""); break;
    case MR_V_SEQ:
        if (a->n != b->n) break;
        eq = 1;
        for (size_t i = 0; eq && i < a->n; i++) eq = mr_value_equal(a->items[i], b->items[i]);
        break;
    case MR_V_MAP:
        if (a->n != b->n) break;
        eq = 1;
        for (size_t i = 0; eq && i < a->n; i++) {
            const mr_value *bv = mr_value_get(b, a->keys[i]);
            eq = bv && mr_value_equal(a->items[i], bv);
        }
        break;
    }
done:
    return eq;
}

/* ---- did you mean ------------------------------------------------------ */

typedef struct path_list {
    char **items;
    size_t n, cap;
} path_list;

static mr_status path_push(path_list *pl, char *s)
{
    mr_status st = MR_OK;
    if (!s) {
        st = MR_E_NOMEM;
        goto done;
    }
    if (pl->n == pl->cap) {
        size_t ncap = pl->cap ? pl->cap * 2 : 8;
        char **ni = mr_realloc(pl->items, ncap * sizeof(*ni));
        if (!ni) {
            mr_free(s);
            st = MR_E_NOMEM;
            goto done;
        }
        pl->items = ni;
        pl->cap = ncap;
    }
    pl->items[pl->n++] = s;
done:
    return st;
}

static mr_status collect_leaves(const mr_value *v, const char *prefix, path_list *pl)
{
    mr_status st = MR_OK;
    for (size_t i = 0; st == MR_OK && i < v->n; i++) {
        char *p = prefix ? mr_asprintf("%s.%s", prefix, v->keys[i]) : mr_strdup(v->keys[i]);
        if (!p) {
            st = MR_E_NOMEM;
            break;
        }
        const mr_value *c = v->items[i];
        if (c->kind == MR_V_MAP && c->n > 0) {
            st = collect_leaves(c, p, pl);
            mr_free(p);
        } else {
            st = path_push(pl, p);
        }
    }
    return st;
}

mr_status mr_value_leaf_paths(const mr_value *root, char ***paths_out, size_t *n_out)
{
    path_list pl = {NULL, 0, 0};
    mr_status st = MR_OK;
    if (root && root->kind == MR_V_MAP) st = collect_leaves(root, NULL, &pl);
    if (st != MR_OK) {
        for (size_t i = 0; i < pl.n; i++) mr_free(pl.items[i]);
        mr_free(pl.items);
        pl.items = NULL;
        pl.n = 0;
    }
    *paths_out = pl.items;
    *n_out = pl.n;
    return st;
}

mr_status mr_value_strings(const mr_value *map, const char *key, const char ***out, size_t *n_out)
{
    const mr_value *v = mr_value_get(map, key);
    *out = NULL;
    *n_out = 0;
    if (!v || v->kind == MR_V_NULL) return MR_OK;
    size_t n = v->kind == MR_V_SEQ || v->kind == MR_V_MAP ? v->n : 1;
    const char **arr = mr_calloc(n ? n : 1, sizeof(*arr));
    if (!arr) return MR_E_NOMEM;
    size_t k = 0;
    if (v->kind == MR_V_SEQ || v->kind == MR_V_MAP) {
        for (size_t i = 0; i < v->n; i++)
            if (v->items[i]->kind == MR_V_STR) arr[k++] = v->items[i]->str;
    } else if (v->kind == MR_V_STR) {
        arr[k++] = v->str;
    }
    *out = arr;
    *n_out = k;
    return MR_OK;
}

/* ---- from JSON ---------------------------------------------------------- */

mr_value *mr_value_from_jansson(const struct json_t *j)
{
    switch (json_typeof(j)) {
    case JSON_OBJECT: {
        mr_value *m = mr_value_new(MR_V_MAP);
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)j, k, x) {
            if (!m || mr_value_map_set(m, k, mr_value_from_jansson(x)) != MR_OK) {
                mr_value_free(m);
                return NULL;
            }
        }
        return m;
    }
    case JSON_ARRAY: {
        mr_value *q = mr_value_new(MR_V_SEQ);
        for (size_t i = 0; q && i < json_array_size(j); i++)
            if (mr_value_seq_push(q, mr_value_from_jansson(json_array_get(j, i))) != MR_OK) {
                mr_value_free(q);
                return NULL;
            }
        return q;
    }
    case JSON_STRING: return mr_value_new_str(json_string_value(j));
    case JSON_INTEGER: return mr_value_new_int((int64_t)json_integer_value(j));
    case JSON_REAL: return mr_value_new_float(json_real_value(j));
    case JSON_TRUE: return mr_value_new_bool(1);
    case JSON_FALSE: return mr_value_new_bool(0);
    default: return mr_value_new(MR_V_NULL);
    }
}

mr_status mr_value_from_json(const char *text, size_t len, const char *what, mr_value **out, mr_error *err)
{
    *out = NULL;
    json_t *j = NULL;
    mr_status rc = mr_json_parse(text, len, JSON_DECODE_ANY, &j, what, err);
    if (rc != MR_OK) return rc;
    *out = mr_value_from_jansson(j);
    json_decref(j);
    if (!*out) return MR_ERR(err, MR_E_NOMEM, "out of memory reading %s", what);
    return MR_OK;
}
