/* Columnar table: typed column buffers with validity bitmaps, appends,
 * slicing, gathering, projection, and value formatting. */
#include "millrace/table.h"
#include "millrace/value.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A column may hold at most 2^31 - 1 rows (codes are int32, row ids uint32). */
#define MAX_ROWS ((size_t)INT32_MAX)
#define MAX_BYTES ((size_t)1 << 40)

static const char *const dtype_names[] = {"null",   "bool", "int64",     "float64", "float32",
                                          "string", "date", "timestamp", "decimal"};

const char *mr_dtype_name(mr_dtype t)
{
    return (unsigned)t < sizeof(dtype_names) / sizeof(dtype_names[0]) ? dtype_names[t] : "unknown";
}

mr_status mr_dtype_parse(const char *name, mr_dtype *out)
{
    for (size_t i = 1; i < sizeof(dtype_names) / sizeof(dtype_names[0]); i++)
        if (!strcmp(name, dtype_names[i])) {
            *out = (mr_dtype)i;
            return MR_OK;
        }
    static const struct { const char *alias; mr_dtype t; } aliases[] = {
        {"int", MR_T_INT64},     {"integer", MR_T_INT64}, {"float", MR_T_FLOAT64}, {"double", MR_T_FLOAT64},
        {"str", MR_T_STRING},    {"boolean", MR_T_BOOL},  {"datetime", MR_T_TIMESTAMP},
    };
    for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
        if (!strcmp(name, aliases[i].alias)) {
            *out = aliases[i].t;
            return MR_OK;
        }
    return MR_E_NOT_FOUND;
}

size_t mr_dtype_width(mr_dtype t)
{
    switch (t) {
    case MR_T_BOOL: return 1;
    case MR_T_INT64:
    case MR_T_FLOAT64:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: return 8;
    case MR_T_FLOAT32:
    case MR_T_DATE: return 4;
    default: return 0;
    }
}

mr_status mr_column_new(const char *name, mr_dtype type, size_t cap_hint, mr_column **out, mr_error *err)
{
    mr_column *c = mr_calloc(1, sizeof(*c));
    if (!c || !(c->name = mr_strdup(name ? name : ""))) {
        mr_free(c);
        return MR_ERR(err, MR_E_NOMEM, "out of memory creating column");
    }
    c->type = type;
    if (type == MR_T_STRING) {
        c->offsets = mr_calloc(1, sizeof(int64_t));
        if (!c->offsets) {
            mr_column_free(c);
            return MR_ERR(err, MR_E_NOMEM, "out of memory creating column");
        }
    }
    if (cap_hint && mr_column_reserve(c, cap_hint) != MR_OK) {
        mr_column_free(c);
        return MR_ERR(err, MR_E_NOMEM, "out of memory creating column '%s'", name);
    }
    *out = c;
    return MR_OK;
}

mr_status mr_column_new_like(const mr_column *src, const char *name, size_t cap_hint, mr_column **out, mr_error *err)
{
    mr_status rc = mr_column_new(name ? name : src->name, src->type, cap_hint, out, err);
    if (rc == MR_OK) (*out)->kind = src->kind;
    return rc;
}

const char *mr_kind_name(mr_dtype t, mr_colkind k, char *buf, size_t n)
{
    if (t == MR_T_INT64 && (k.int_bits || (k.flags & MR_KIND_UNSIGNED)))
        snprintf(buf, n, "%sint%u", k.flags & MR_KIND_UNSIGNED ? "u" : "", k.int_bits ? k.int_bits : 64u);
    else if (t == MR_T_STRING && (k.flags & MR_KIND_BINARY))
        snprintf(buf, n, "binary");
    else if (t == MR_T_TIMESTAMP && (k.flags & MR_KIND_LOCAL))
        snprintf(buf, n, "timestamp_local");
    else if (t == MR_T_DECIMAL)
        snprintf(buf, n, "decimal(%u,%u)", k.precision, k.scale);
    else
        snprintf(buf, n, "%s", mr_dtype_name(t));
    return buf;
}

mr_status mr_kind_parse(const char *name, mr_dtype *type, mr_colkind *kind)
{
    static const struct { const char *name; mr_dtype t; mr_colkind k; } kinds[] = {
        {"int8", MR_T_INT64, {.int_bits = 8, .flags = 0}},
        {"int16", MR_T_INT64, {.int_bits = 16, .flags = 0}},
        {"int32", MR_T_INT64, {.int_bits = 32, .flags = 0}},
        {"uint8", MR_T_INT64, {.int_bits = 8, .flags = MR_KIND_UNSIGNED}},
        {"uint16", MR_T_INT64, {.int_bits = 16, .flags = MR_KIND_UNSIGNED}},
        {"uint32", MR_T_INT64, {.int_bits = 32, .flags = MR_KIND_UNSIGNED}},
        {"uint64", MR_T_INT64, {.int_bits = 0, .flags = MR_KIND_UNSIGNED}},
        {"binary", MR_T_STRING, {.int_bits = 0, .flags = MR_KIND_BINARY}},
        {"bytes", MR_T_STRING, {.int_bits = 0, .flags = MR_KIND_BINARY}},
        {"timestamp_local", MR_T_TIMESTAMP, {.int_bits = 0, .flags = MR_KIND_LOCAL}},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++)
        if (!strcmp(name, kinds[i].name)) {
            *type = kinds[i].t;
            *kind = kinds[i].k;
            return MR_OK;
        }
    unsigned p, sc;
    int end = 0;
    if (sscanf(name, "decimal(%u,%u)%n", &p, &sc, &end) == 2 && end > 0 && !name[end]) {
        if (p < 1 || p > MR_DECIMAL_MAX_PRECISION || sc > p) return MR_E_NOT_FOUND;
        *type = MR_T_DECIMAL;
        *kind = (mr_colkind){0, 0, (uint8_t)p, (uint8_t)sc};
        return MR_OK;
    }
    mr_status rc = mr_dtype_parse(name, type);
    if (rc == MR_OK && *type == MR_T_DECIMAL) return MR_E_NOT_FOUND; /* needs its precision and scale */
    if (rc == MR_OK) *kind = (mr_colkind){0};
    return rc;
}

static const int64_t pow10_i64[19] = {1,
                                      10,
                                      100,
                                      1000,
                                      10000,
                                      100000,
                                      1000000,
                                      10000000,
                                      100000000,
                                      1000000000,
                                      10000000000,
                                      100000000000,
                                      1000000000000,
                                      10000000000000,
                                      100000000000000,
                                      1000000000000000,
                                      10000000000000000,
                                      100000000000000000,
                                      1000000000000000000};

double mr_decimal_to_f64(int64_t unscaled, unsigned scale)
{
    static const double p10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11, 1e12,
                                 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (scale < sizeof p10 / sizeof p10[0]) return (double)unscaled / p10[scale];
    return (double)unscaled / pow(10.0, (double)scale);
}

mr_status mr_decimal_format(int64_t unscaled, unsigned scale, mr_buf *out)
{
    char digits[24];
    uint64_t mag = unscaled < 0 ? (uint64_t)0 - (uint64_t)unscaled : (uint64_t)unscaled;
    int n = snprintf(digits, sizeof digits, "%llu", (unsigned long long)mag);
    mr_status rc = unscaled < 0 ? mr_buf_puts(out, "-") : MR_OK;
    if (scale == 0) return rc == MR_OK ? mr_buf_append(out, digits, (size_t)n) : rc;
    if ((unsigned)n <= scale) { /* 0.00ddd */
        if (rc == MR_OK) rc = mr_buf_puts(out, "0.");
        for (unsigned k = (unsigned)n; rc == MR_OK && k < scale; k++) rc = mr_buf_puts(out, "0");
        return rc == MR_OK ? mr_buf_append(out, digits, (size_t)n) : rc;
    }
    size_t whole = (size_t)n - scale;
    if (rc == MR_OK) rc = mr_buf_append(out, digits, whole);
    if (rc == MR_OK) rc = mr_buf_puts(out, ".");
    return rc == MR_OK ? mr_buf_append(out, digits + whole, scale) : rc;
}

int mr_decimal_parse(const char *s, size_t len, unsigned scale, int64_t *out)
{
    size_t i = 0;
    int neg = 0;
    if (i < len && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    uint64_t m = 0;
    unsigned frac = 0;
    int any = 0, dot = 0;
    for (; i < len; i++) {
        if (s[i] == '.' && !dot) {
            dot = 1;
            continue;
        }
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d > 9) return -1;
        any = 1;
        if (dot && frac == scale) {
            if (d) return -1; /* more fractional digits than the scale keeps: not exact */
            continue;
        }
        if (m > (UINT64_C(1) << 63) / 10) return -1;
        m = m * 10 + d;
        frac += dot;
    }
    if (!any) return -1;
    for (; frac < scale; frac++) {
        if (m > (UINT64_C(1) << 63) / 10) return -1;
        m *= 10;
    }
    if (m > (uint64_t)INT64_MAX + (uint64_t)neg) return -1;
    *out = neg ? (int64_t)(0 - m) : (int64_t)m;
    return 0;
}

int mr_kind_fits(mr_dtype t, mr_colkind k, int64_t v)
{
    if (t == MR_T_DECIMAL)
        return k.precision < 1 || k.precision > 18 || (v < pow10_i64[k.precision] && v > -pow10_i64[k.precision]);
    if (t != MR_T_INT64 || (!k.int_bits && !(k.flags & MR_KIND_UNSIGNED))) return 1;
    unsigned bits = k.int_bits ? k.int_bits : 64;
    if (k.flags & MR_KIND_UNSIGNED) return v >= 0 && (bits == 64 || v <= (int64_t)((UINT64_C(1) << bits) - 1));
    return v >= -(INT64_C(1) << (bits - 1)) && v <= (INT64_C(1) << (bits - 1)) - 1;
}

int mr_column_fits_kind(const mr_column *c, size_t *bad_row)
{
    if (c->type != MR_T_INT64 && c->type != MR_T_DECIMAL) return 1;
    if (c->type == MR_T_INT64 && !c->kind.int_bits && !(c->kind.flags & MR_KIND_UNSIGNED)) return 1;
    const int64_t *v = c->data;
    for (size_t i = 0; i < c->n; i++)
        if (!mr_kind_fits(c->type, c->kind, v[i]) && !mr_column_is_null(c, i)) {
            if (bad_row) *bad_row = i;
            return 0;
        }
    return 1;
}

mr_status mr_column_new_dict(const char *name, mr_column *dict, size_t cap_hint, mr_column **out, mr_error *err)
{
    if (!dict || dict->type != MR_T_STRING || dict->codes) {
        mr_column_free(dict);
        return MR_ERR(err, MR_E_INVALID_ARG, "a dictionary must be a plain string column");
    }
    mr_column *c = NULL;
    mr_status rc = mr_column_new(name, MR_T_STRING, 0, &c, err);
    if (rc != MR_OK) {
        mr_column_free(dict);
        return rc;
    }
    c->dict = dict;
    c->codes = mr_malloc(sizeof(int32_t));
    if (!c->codes || (cap_hint && mr_column_reserve(c, cap_hint) != MR_OK)) {
        mr_column_free(c);
        return MR_ERR(err, MR_E_NOMEM, "out of memory creating column '%s'", name);
    }
    *out = c;
    return MR_OK;
}

void mr_column_free(mr_column *c)
{
    if (!c) return;
    mr_free(c->name);
    mr_free(c->valid);
    mr_free(c->data);
    mr_free(c->offsets);
    mr_free(c->bytes);
    mr_free(c->codes);
    mr_column_free(c->dict);
    mr_free(c);
}

void mr_column_clear(mr_column *c)
{
    c->n = 0;
    c->null_count = 0;
    if (c->valid) memset(c->valid, 0xff, (c->cap + 7) / 8 ? (c->cap + 7) / 8 : 1); /* all valid, as appends expect */
    c->bytes_len = 0;
    if (c->offsets) c->offsets[0] = 0;
    mr_free(c->codes); /* plain from here on */
    c->codes = NULL;
    mr_column_free(c->dict);
    c->dict = NULL;
}

static int grow(void **p, size_t elem, size_t n)
{
    if (n > SIZE_MAX / elem) return -1;
    void *q = mr_realloc(*p, elem * n);
    if (!q) return -1;
    *p = q;
    return 0;
}

mr_status mr_column_reserve(mr_column *c, size_t n_rows)
{
    if (n_rows <= c->cap) return MR_OK;
    if (n_rows > MAX_ROWS) return MR_E_LIMIT;
    size_t ncap = c->cap ? c->cap : 16;
    while (ncap < n_rows) ncap = ncap > MAX_ROWS / 2 ? MAX_ROWS : ncap * 2;
    if (c->type == MR_T_STRING) {
        if (c->codes) {
            if (grow((void **)&c->codes, sizeof(int32_t), ncap)) return MR_E_NOMEM;
        } else if (grow((void **)&c->offsets, sizeof(int64_t), ncap + 1)) {
            return MR_E_NOMEM;
        }
    } else if (mr_dtype_width(c->type)) {
        if (grow(&c->data, mr_dtype_width(c->type), ncap)) return MR_E_NOMEM;
    }
    if (c->valid) {
        size_t old = (c->cap + 7) / 8, nb = (ncap + 7) / 8;
        if (grow((void **)&c->valid, 1, nb)) return MR_E_NOMEM;
        memset(c->valid + old, 0xff, nb - old);
    }
    c->cap = ncap;
    return MR_OK;
}

static mr_status ensure_room(mr_column *c)
{
    return c->n < c->cap ? MR_OK : mr_column_reserve(c, c->n + 1);
}

static void set_valid(mr_column *c, size_t i, int v)
{
    if (v) c->valid[i >> 3] |= (uint8_t)(1u << (i & 7));
    else c->valid[i >> 3] &= (uint8_t)~(1u << (i & 7));
}

mr_status mr_column_append_null(mr_column *c)
{
    mr_status rc = ensure_room(c);
    if (rc != MR_OK) return rc;
    if (!c->valid) {
        size_t nb = (c->cap + 7) / 8;
        c->valid = mr_malloc(nb ? nb : 1);
        if (!c->valid) return MR_E_NOMEM;
        memset(c->valid, 0xff, nb ? nb : 1);
    }
    set_valid(c, c->n, 0);
    c->null_count++;
    size_t w = mr_dtype_width(c->type);
    if (c->type == MR_T_STRING) {
        if (c->codes) c->codes[c->n] = 0;
        else c->offsets[c->n + 1] = c->offsets[c->n];
    } else if (w) {
        memset((char *)c->data + c->n * w, 0, w);
    }
    c->n++;
    return MR_OK;
}

#define APPEND_FIXED(fn, T, ok_types)                                            \
    mr_status fn(mr_column *c, T v)                                              \
    {                                                                            \
        MR_ASSERT(ok_types);                                                     \
        mr_status rc = ensure_room(c);                                           \
        if (rc != MR_OK) return rc;                                              \
        ((T *)c->data)[c->n] = v;                                                \
        if (c->valid) set_valid(c, c->n, 1);                                     \
        c->n++;                                                                  \
        return MR_OK;                                                            \
    }

APPEND_FIXED(mr_column_append_int64, int64_t, c->type == MR_T_INT64 || c->type == MR_T_TIMESTAMP || c->type == MR_T_DECIMAL)
APPEND_FIXED(mr_column_append_int32, int32_t, c->type == MR_T_DATE)
APPEND_FIXED(mr_column_append_float64, double, c->type == MR_T_FLOAT64)
APPEND_FIXED(mr_column_append_float32, float, c->type == MR_T_FLOAT32)

mr_status mr_column_append_bool(mr_column *c, int v)
{
    MR_ASSERT(c->type == MR_T_BOOL);
    mr_status rc = ensure_room(c);
    if (rc != MR_OK) return rc;
    ((uint8_t *)c->data)[c->n] = v ? 1 : 0;
    if (c->valid) set_valid(c, c->n, 1);
    c->n++;
    return MR_OK;
}

mr_status mr_column_append_str(mr_column *c, const char *s, size_t len)
{
    MR_ASSERT(c->type == MR_T_STRING && !c->codes);
    mr_status rc = ensure_room(c);
    if (rc != MR_OK) return rc;
    if (len > MAX_BYTES - c->bytes_len) return MR_E_LIMIT;
    if (c->bytes_len + len > c->bytes_cap) {
        size_t ncap = c->bytes_cap ? c->bytes_cap : 64;
        while (ncap < c->bytes_len + len) ncap *= 2;
        char *nb = mr_realloc(c->bytes, ncap);
        if (!nb) return MR_E_NOMEM;
        c->bytes = nb;
        c->bytes_cap = ncap;
    }
    if (len) memcpy(c->bytes + c->bytes_len, s, len);
    c->bytes_len += len;
    c->offsets[c->n + 1] = (int64_t)c->bytes_len;
    if (c->valid) set_valid(c, c->n, 1);
    c->n++;
    return MR_OK;
}

mr_status mr_column_append_code(mr_column *c, int32_t code)
{
    MR_ASSERT(c->type == MR_T_STRING && c->codes);
    if (code < 0 || (size_t)code >= c->dict->n) return MR_E_INVALID_ARG;
    mr_status rc = ensure_room(c);
    if (rc != MR_OK) return rc;
    c->codes[c->n] = code;
    if (c->valid) set_valid(c, c->n, 1);
    c->n++;
    return MR_OK;
}

const char *mr_column_str(const mr_column *c, size_t i, size_t *len_out)
{
    if (c->codes) return mr_column_str(c->dict, (size_t)c->codes[i], len_out);
    *len_out = (size_t)(c->offsets[i + 1] - c->offsets[i]);
    return c->bytes ? c->bytes + c->offsets[i] : "";
}

/* Appends row i of src to dst (same type; dst plain if STRING). */
static mr_status append_row(mr_column *dst, const mr_column *src, size_t i)
{
    if (mr_column_is_null(src, i)) return mr_column_append_null(dst);
    switch (src->type) {
    case MR_T_BOOL: return mr_column_append_bool(dst, ((const uint8_t *)src->data)[i]);
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: return mr_column_append_int64(dst, ((const int64_t *)src->data)[i]);
    case MR_T_DATE: return mr_column_append_int32(dst, ((const int32_t *)src->data)[i]);
    case MR_T_FLOAT64: return mr_column_append_float64(dst, ((const double *)src->data)[i]);
    case MR_T_FLOAT32: return mr_column_append_float32(dst, ((const float *)src->data)[i]);
    case MR_T_STRING: {
        if (dst->codes && src->codes && dst->dict == src->dict) return mr_column_append_code(dst, src->codes[i]);
        size_t len;
        const char *s = mr_column_str(src, i, &len);
        return mr_column_append_str(dst, s, len);
    }
    default: return mr_column_append_null(dst);
    }
}

/* d's validity (its rows 0..n-1 just written, no bitmap yet) from c's rows
 * idx[k] (idx NULL: begin + k). MR_E_NOMEM. */
static mr_status copy_nulls(mr_column *d, const mr_column *c, const uint32_t *idx, size_t begin, size_t n)
{
    if (!c->valid || !c->null_count) return MR_OK;
    size_t nb = (d->cap + 7) / 8;
    d->valid = mr_malloc(nb ? nb : 1);
    if (!d->valid) return MR_E_NOMEM;
    memset(d->valid, 0xff, nb ? nb : 1);
    for (size_t k = 0; k < n; k++)
        if (mr_column_is_null(c, idx ? idx[k] : begin + k)) {
            d->valid[k >> 3] &= (uint8_t) ~(1u << (k & 7));
            d->null_count++;
        }
    return MR_OK;
}

/* Rows [begin, begin + n) by block copies; dictionary columns stay encoded
 * (the slice gets its own copy of the dictionary). */
static mr_status slice_fast(const mr_column *c, size_t begin, size_t n, mr_column **out, mr_error *err)
{
    mr_column *d = NULL, *dict = NULL;
    mr_status rc = MR_OK;
    if (c->codes) {
        rc = mr_column_slice(c->dict, 0, c->dict->n, &dict, err);
        if (rc == MR_OK) rc = mr_column_new_dict(c->name, dict, n, &d, err);
    } else {
        rc = mr_column_new(c->name, c->type, n, &d, err);
    }
    if (rc != MR_OK) return rc;
    d->kind = c->kind;
    if (c->codes) {
        memcpy(d->codes, c->codes + begin, n * sizeof(int32_t));
    } else if (c->type == MR_T_STRING) {
        int64_t b0 = c->offsets[begin];
        size_t nb = (size_t)(c->offsets[begin + n] - b0);
        if (nb) {
            d->bytes = mr_malloc(nb);
            if (!d->bytes) {
                mr_column_free(d);
                return MR_ERR(err, MR_E_NOMEM, "out of memory copying column '%s'", c->name);
            }
            memcpy(d->bytes, c->bytes + b0, nb);
        }
        d->bytes_len = d->bytes_cap = nb;
        for (size_t i = 0; i <= n; i++) d->offsets[i] = c->offsets[begin + i] - b0;
    } else if (mr_dtype_width(c->type)) {
        size_t w = mr_dtype_width(c->type);
        memcpy(d->data, (const char *)c->data + begin * w, n * w);
    }
    d->n = n;
    if (copy_nulls(d, c, NULL, begin, n) != MR_OK) {
        mr_column_free(d);
        return MR_ERR(err, MR_E_NOMEM, "out of memory copying column '%s'", c->name);
    }
    *out = d;
    return MR_OK;
}

/* Rows idx[0, n) of a fixed-width column, by typed copies: one pass for the
 * values, one for the validity when c has nulls (a gather of a million rows
 * was a tenth of a point-in-time join row by row). */
static mr_status gather_fixed(const mr_column *c, const uint32_t *idx, size_t n, mr_column **out, mr_error *err)
{
    mr_column *d = NULL;
    mr_status rc = mr_column_new_like(c, NULL, n, &d, err);
    if (rc != MR_OK) return rc;
    if (n && (rc = mr_column_reserve(d, n)) != MR_OK) {
        mr_column_free(d);
        return MR_ERR(err, rc, "cannot copy %zu rows of column '%s'", n, c->name);
    }
    size_t w = mr_dtype_width(c->type);
    char *dst = d->data;
    const char *src = c->data;
    switch (w) {
    case 8:
        for (size_t k = 0; k < n; k++) memcpy(dst + 8 * k, src + 8 * (size_t)idx[k], 8);
        break;
    case 4:
        for (size_t k = 0; k < n; k++) memcpy(dst + 4 * k, src + 4 * (size_t)idx[k], 4);
        break;
    default:
        for (size_t k = 0; k < n; k++) memcpy(dst + w * k, src + w * (size_t)idx[k], w);
        break;
    }
    d->n = n;
    if (copy_nulls(d, c, idx, 0, n) != MR_OK) {
        mr_column_free(d);
        return MR_ERR(err, MR_E_NOMEM, "out of memory copying column '%s'", c->name);
    }
    *out = d;
    return MR_OK;
}

/* Row-by-row copy into a plain column (dictionary columns are decoded). */
static mr_status gather_rows(const mr_column *c, const uint32_t *idx, size_t begin, size_t n, mr_column **out,
                             mr_error *err)
{
    if (idx && c->type != MR_T_STRING && mr_dtype_width(c->type)) {
        for (size_t k = 0; k < n; k++) MR_ASSERT(idx[k] < c->n);
        return gather_fixed(c, idx, n, out, err);
    }
    mr_column *d = NULL;
    mr_status rc = mr_column_new_like(c, NULL, n, &d, err);
    for (size_t k = 0; rc == MR_OK && k < n; k++) {
        size_t i = idx ? idx[k] : begin + k;
        MR_ASSERT(i < c->n);
        rc = append_row(d, c, i);
        if (rc != MR_OK) MR_ERR(err, rc, "out of memory copying column '%s'", c->name);
    }
    if (rc != MR_OK) {
        mr_column_free(d);
        return rc;
    }
    *out = d;
    return MR_OK;
}

static mr_status gather(const mr_column *c, const uint32_t *idx, size_t begin, size_t n, mr_column **out, mr_error *err)
{
    if (!idx && n && c->type != MR_T_NULL) return slice_fast(c, begin, n, out, err);
    return gather_rows(c, idx, begin, n, out, err);
}

mr_status mr_column_slice(const mr_column *c, size_t begin, size_t end, mr_column **out, mr_error *err)
{
    MR_ASSERT(begin <= end && end <= c->n);
    return gather(c, NULL, begin, end - begin, out, err);
}

mr_status mr_column_take(const mr_column *c, const uint32_t *idx, size_t n_idx, mr_column **out, mr_error *err)
{
    return gather(c, idx, 0, n_idx, out, err);
}

mr_status mr_column_materialize(mr_column *c, mr_error *err)
{
    if (!c->codes) return MR_OK;
    mr_column *plain = NULL;
    mr_status rc = gather_rows(c, NULL, 0, c->n, &plain, err);
    if (rc != MR_OK) return rc;
    mr_free(c->codes);
    mr_column_free(c->dict);
    mr_free(c->valid);
    mr_free(c->offsets);
    mr_free(c->bytes);
    c->codes = NULL;
    c->dict = NULL;
    c->valid = plain->valid;
    c->offsets = plain->offsets;
    c->bytes = plain->bytes;
    c->bytes_len = plain->bytes_len;
    c->bytes_cap = plain->bytes_cap;
    c->cap = plain->cap;
    c->null_count = plain->null_count;
    plain->valid = NULL;
    plain->offsets = NULL;
    plain->bytes = NULL;
    mr_column_free(plain);
    return MR_OK;
}

mr_status mr_column_append_column(mr_column *dst, const mr_column *src, mr_error *err)
{
    if (dst->type != src->type)
        return MR_ERR(err, MR_E_SCHEMA, "column '%s': cannot append %s values to a %s column", dst->name,
                      mr_dtype_name(src->type), mr_dtype_name(dst->type));
    if (dst->type == MR_T_DECIMAL && dst->kind.scale != src->kind.scale)
        return MR_ERR(err, MR_E_SCHEMA, "column '%s': cannot append decimals of scale %u to a column of scale %u",
                      dst->name, src->kind.scale, dst->kind.scale);
    if (src->n == 0) return MR_OK;
    mr_status rc = mr_column_reserve(dst, dst->n + src->n);
    size_t w = mr_dtype_width(src->type);
    if (rc == MR_OK && w && !src->valid && !dst->valid) { /* fast path: one memcpy */
        memcpy((char *)dst->data + dst->n * w, src->data, src->n * w);
        dst->n += src->n;
        return MR_OK;
    }
    if (rc == MR_OK && dst->codes && !(src->codes && src->dict == dst->dict)) rc = mr_column_materialize(dst, err);
    for (size_t i = 0; rc == MR_OK && i < src->n; i++) rc = append_row(dst, src, i);
    if (rc != MR_OK) return MR_ERR(err, rc, "out of memory appending to column '%s'", dst->name);
    return MR_OK;
}

/* ---- tables ----------------------------------------------------------- */

mr_status mr_table_new(mr_table **out, mr_error *err)
{
    mr_table *t = mr_calloc(1, sizeof(*t));
    if (!t) return MR_ERR(err, MR_E_NOMEM, "out of memory creating table");
    *out = t;
    return MR_OK;
}

void mr_table_free(mr_table *t)
{
    if (!t) return;
    for (size_t i = 0; i < t->n_cols; i++) mr_column_free(t->cols[i]);
    mr_free(t->cols);
    mr_strindex_deinit(&t->by_name);
    mr_free(t);
}

/* The name index: a table of INDEX_MIN columns or more keeps by_name over
 * all its columns (ids = positions); a smaller one (or a view in caller
 * storage, by_name zeroed) is scanned, which is as cheap at that size. */
#define INDEX_MIN 16

static const char *col_name_of(const void *ctx, size_t id) { return ((const mr_table *)ctx)->cols[id]->name; }

static int indexed(const mr_table *t) { return t->by_name.n_slots && t->by_name.n == t->n_cols; }

/* Builds by_name over every column. MR_E_NOMEM leaves it empty. */
static mr_status index_build(mr_table *t)
{
    mr_strindex_clear(&t->by_name);
    mr_status rc = mr_strindex_reserve(&t->by_name, t->n_cols);
    for (size_t i = 0; rc == MR_OK && i < t->n_cols; i++) rc = mr_strindex_add(&t->by_name, i, col_name_of, t, NULL);
    if (rc != MR_OK) mr_strindex_deinit(&t->by_name);
    return rc;
}

ssize_t mr_table_column_index(const mr_table *t, const char *name)
{
    if (indexed(t)) return mr_strindex_find(&t->by_name, name, col_name_of, t);
    for (size_t i = 0; i < t->n_cols; i++)
        if (!strcmp(t->cols[i]->name, name)) return (ssize_t)i;
    return -1;
}

mr_column *mr_table_column(const mr_table *t, const char *name)
{
    ssize_t i = mr_table_column_index(t, name);
    return i < 0 ? NULL : t->cols[i];
}

mr_column *mr_table_column_hint(const mr_table *t, size_t hint, const char *name)
{
    if (hint < t->n_cols && !strcmp(t->cols[hint]->name, name)) return t->cols[hint];
    return mr_table_column(t, name);
}

mr_status mr_table_add_column(mr_table *t, mr_column *col, mr_error *err)
{
    mr_status rc = MR_OK;
    if (mr_table_column_index(t, col->name) >= 0) {
        rc = MR_ERR(err, MR_E_SCHEMA, "duplicate column name '%s'", col->name);
    } else if (t->n_cols && col->n != t->n_rows) {
        rc = MR_ERR(err, MR_E_SCHEMA, "column '%s' has %zu rows, the table has %zu", col->name, col->n, t->n_rows);
    } else {
        size_t n = t->n_cols;
        mr_column **nc = t->cols;
        if (n == t->cols_cap) { /* grows by doubling: O(1) amortised per column */
            size_t cap = n ? 2 * n : 4;
            nc = cap <= SIZE_MAX / sizeof(*nc) ? mr_realloc(t->cols, cap * sizeof(*nc)) : NULL;
            if (nc) {
                t->cols = nc;
                t->cols_cap = cap;
            }
        }
        if (!nc) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        } else {
            t->cols[n] = col;
            t->n_cols = n + 1;
            if (t->n_cols == INDEX_MIN) rc = index_build(t);
            else if (t->n_cols > INDEX_MIN) rc = mr_strindex_add(&t->by_name, n, col_name_of, t, NULL);
            if (rc == MR_OK) {
                t->n_rows = col->n;
                return MR_OK;
            }
            /* take it out again: the index (unchanged, or dropped below
             * INDEX_MIN columns) still matches the table */
            t->cols[n] = NULL;
            t->n_cols = n;
            rc = MR_ERR(err, rc, "out of memory indexing column '%s'", col->name);
        }
    }
    mr_column_free(col);
    return rc;
}

mr_status mr_table_set_column(mr_table *t, size_t i, mr_column *col, mr_error *err)
{
    MR_ASSERT(i < t->n_cols);
    mr_status rc = MR_OK;
    ssize_t other = mr_table_column_index(t, col->name);
    if (other >= 0 && (size_t)other != i) {
        rc = MR_ERR(err, MR_E_SCHEMA, "duplicate column name '%s'", col->name);
    } else if (col->n != t->n_rows) {
        rc = MR_ERR(err, MR_E_SCHEMA, "column '%s' has %zu rows, the table has %zu", col->name, col->n, t->n_rows);
    } else if (other < 0 && indexed(t)) { /* a new name: re-index position i */
        mr_strindex_remove(&t->by_name, i, col_name_of, t);
        mr_column *old = t->cols[i];
        t->cols[i] = col;
        rc = mr_strindex_add(&t->by_name, i, col_name_of, t, NULL); /* no growth: cannot fail */
        MR_ASSERT(rc == MR_OK);
        mr_column_free(old);
        return MR_OK;
    } else {
        mr_column_free(t->cols[i]);
        t->cols[i] = col;
        return MR_OK;
    }
    mr_column_free(col);
    return rc;
}

static const char *str_of(const void *ctx, size_t id) { return ((char *const *)ctx)[id]; }

/* MR_OK when renaming columns idx[0..n) to nn[0..n) leaves the names
 * unique; t's index, if kept, has idx already taken out. */
static mr_status rename_check(const mr_table *t, const size_t *idx, char *const *nn, size_t n, int use_index,
                              mr_error *err)
{
    mr_strindex fresh; /* the new names among themselves */
    mr_strindex_init(&fresh);
    mr_status rc = mr_strindex_reserve(&fresh, n);
    for (size_t k = 0; rc == MR_OK && k < n; k++) {
        size_t dup;
        rc = mr_strindex_add(&fresh, k, str_of, nn, &dup);
        if (rc != MR_OK) {
            rc = MR_ERR(err, rc, "out of memory renaming columns");
        } else if (dup != SIZE_MAX) {
            rc = MR_ERR(err, MR_E_SCHEMA, "duplicate column name '%s' after renaming", nn[k]);
        } else if (use_index) {
            if (mr_strindex_find(&t->by_name, nn[k], col_name_of, t) >= 0)
                rc = MR_ERR(err, MR_E_SCHEMA, "duplicate column name '%s' after renaming", nn[k]);
        } else { /* a small table: scan the columns that keep their names */
            for (size_t j = 0; rc == MR_OK && j < t->n_cols; j++) {
                int renamed = 0;
                for (size_t q = 0; q < n && !renamed; q++) renamed = idx[q] == j;
                if (!renamed && !strcmp(t->cols[j]->name, nn[k]))
                    rc = MR_ERR(err, MR_E_SCHEMA, "duplicate column name '%s' after renaming", nn[k]);
            }
        }
    }
    mr_strindex_deinit(&fresh);
    return rc;
}

mr_status mr_table_rename_columns(mr_table *t, const size_t *idx, const char *const *names, size_t n, mr_error *err)
{
    mr_status rc = MR_OK;
    char **nn = mr_calloc(n ? n : 1, sizeof(*nn));
    uint8_t *seen = mr_calloc(t->n_cols ? t->n_cols : 1, 1);
    int oom = !nn || !seen;
    for (size_t k = 0; !oom && k < n; k++) {
        MR_ASSERT(idx[k] < t->n_cols);
        if (seen[idx[k]]) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "column '%s' renamed twice", t->cols[idx[k]]->name);
            goto done;
        }
        seen[idx[k]] = 1;
        nn[k] = mr_strdup(names[k]);
        oom = !nn[k];
    }
    if (oom) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory renaming columns");
        goto done;
    }
    int use_index = indexed(t);
    if (use_index)
        for (size_t k = 0; k < n; k++) mr_strindex_remove(&t->by_name, idx[k], col_name_of, t);
    rc = rename_check(t, idx, nn, n, use_index, err);
    if (rc == MR_OK) {
        for (size_t k = 0; k < n; k++) {
            char *old = t->cols[idx[k]]->name;
            t->cols[idx[k]]->name = nn[k];
            nn[k] = old; /* freed below */
        }
    }
    for (size_t k = 0; use_index && k < n; k++) { /* re-index, under the new names or the old */
        mr_status ar = mr_strindex_add(&t->by_name, idx[k], col_name_of, t, NULL);
        MR_ASSERT(ar == MR_OK); /* the slots were there a moment ago */
    }
done:
    for (size_t k = 0; nn && k < n; k++) mr_free(nn[k]);
    mr_free(nn);
    mr_free(seen);
    return rc;
}

static mr_status table_gather(const mr_table *t, const uint32_t *idx, size_t begin, size_t n, mr_table **out,
                              mr_error *err)
{
    mr_table *r = NULL;
    mr_status rc = mr_table_new(&r, err);
    for (size_t i = 0; rc == MR_OK && i < t->n_cols; i++) {
        mr_column *c = NULL;
        rc = gather(t->cols[i], idx, begin, n, &c, err);
        if (rc == MR_OK) rc = mr_table_add_column(r, c, err);
    }
    if (rc != MR_OK) {
        mr_table_free(r);
        return rc;
    }
    r->n_rows = n;
    *out = r;
    return MR_OK;
}

mr_status mr_table_slice(const mr_table *t, size_t begin, size_t end, mr_table **out, mr_error *err)
{
    MR_ASSERT(begin <= end && end <= t->n_rows);
    return table_gather(t, NULL, begin, end - begin, out, err);
}

mr_status mr_table_take(const mr_table *t, const uint32_t *idx, size_t n_idx, mr_table **out, mr_error *err)
{
    return table_gather(t, idx, 0, n_idx, out, err);
}

mr_status mr_table_append(mr_table *dst, const mr_table *src, mr_error *err)
{
    if (dst->n_cols == 0 && dst->n_rows == 0) {
        for (size_t i = 0; i < src->n_cols; i++) {
            mr_column *c = NULL;
            mr_status rc = gather(src->cols[i], NULL, 0, src->n_rows, &c, err);
            if (rc == MR_OK) rc = mr_table_add_column(dst, c, err);
            if (rc != MR_OK) return rc;
        }
        dst->n_rows = src->n_rows;
        return MR_OK;
    }
    if (dst->n_cols != src->n_cols)
        return MR_ERR(err, MR_E_SCHEMA, "cannot append a table of %zu columns to one of %zu", src->n_cols, dst->n_cols);
    for (size_t i = 0; i < dst->n_cols; i++)
        if (strcmp(dst->cols[i]->name, src->cols[i]->name) || dst->cols[i]->type != src->cols[i]->type)
            return MR_ERR(err, MR_E_SCHEMA, "column %zu: expected '%s' (%s), got '%s' (%s)", i + 1, dst->cols[i]->name,
                          mr_dtype_name(dst->cols[i]->type), src->cols[i]->name, mr_dtype_name(src->cols[i]->type));
    for (size_t i = 0; i < dst->n_cols; i++) {
        mr_status rc = mr_column_append_column(dst->cols[i], src->cols[i], err);
        if (rc != MR_OK) return rc;
    }
    dst->n_rows += src->n_rows;
    return MR_OK;
}

mr_status mr_table_project(mr_table *t, const char *const *names, size_t n, mr_error *err)
{
    mr_status rc = MR_OK;
    mr_table nt = {t->n_rows, n, NULL, n, {0}}; /* the result, committed at the end */
    uint8_t *kept = mr_calloc(t->n_cols ? t->n_cols : 1, 1);
    nt.cols = mr_calloc(n ? n : 1, sizeof(*nt.cols));
    if (!kept || !nt.cols) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t k = 0; k < n; k++) {
        ssize_t i = mr_table_column_index(t, names[k]);
        if (i < 0) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "no column '%s'", names[k]);
            const char **cands = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof(*cands));
            for (size_t q = 0; cands && q < t->n_cols; q++) cands[q] = t->cols[q]->name;
            const char *best = cands ? mr_closest(names[k], cands, t->n_cols) : NULL;
            if (best) mr_error_hint(err, "did you mean '%s'?", best);
            mr_free(cands);
            goto fail;
        }
        if (kept[i]) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "column '%s' selected twice", names[k]);
            goto fail;
        }
        kept[i] = 1;
        nt.cols[k] = t->cols[i];
    }
    if (n >= INDEX_MIN && index_build(&nt) != MR_OK) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto fail;
    }
    for (size_t i = 0; i < t->n_cols; i++)
        if (!kept[i]) mr_column_free(t->cols[i]);
    mr_free(kept);
    mr_free(t->cols);
    mr_strindex_deinit(&t->by_name);
    *t = nt;
    return MR_OK;
fail:
    mr_free(kept);
    mr_free(nt.cols);
    return rc;
}

/* ---- formatting and calendars ----------------------------------------- */

int32_t mr_date_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return (int32_t)(era * 146097 + (int64_t)doe - 719468);
}

void mr_date_to_civil(int32_t days, int64_t *y, unsigned *m, unsigned *d)
{
    int64_t z = (int64_t)days + 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

static int digits(const char *s, size_t n, int64_t *v)
{
    *v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        *v = *v * 10 + (s[i] - '0');
    }
    return 0;
}

static int days_in_month(int64_t y, unsigned m)
{
    static const int dm[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    return m == 2 ? 28 + leap : dm[m - 1];
}

int mr_date_parse(const char *s, size_t len, int32_t *days_out)
{
    int64_t y, m, d;
    if (len != 10 || s[4] != '-' || s[7] != '-' || digits(s, 4, &y) || digits(s + 5, 2, &m) || digits(s + 8, 2, &d))
        return -1;
    if (m < 1 || m > 12 || d < 1 || d > days_in_month(y, (unsigned)m)) return -1;
    *days_out = mr_date_from_civil(y, (unsigned)m, (unsigned)d);
    return 0;
}

int mr_timestamp_parse(const char *s, size_t len, int64_t *us_out)
{
    int32_t days;
    int64_t hh, mm, ss, frac = 0, offset_s = 0;
    if (len < 19 || mr_date_parse(s, 10, &days) || (s[10] != 'T' && s[10] != ' ') || s[13] != ':' || s[16] != ':' ||
        digits(s + 11, 2, &hh) || digits(s + 14, 2, &mm) || digits(s + 17, 2, &ss) || hh > 23 || mm > 59 || ss > 60)
        return -1;
    size_t p = 19;
    if (p < len && s[p] == '.') {
        size_t start = ++p;
        while (p < len && s[p] >= '0' && s[p] <= '9') p++;
        size_t nd = p - start;
        if (nd == 0 || nd > 9) return -1;
        int64_t f;
        digits(s + start, nd, &f);
        for (size_t k = nd; k < 6; k++) f *= 10;
        for (size_t k = 6; k < nd; k++) f /= 10;
        frac = f;
    }
    if (p < len && (s[p] == 'Z' || s[p] == 'z')) {
        p++;
    } else if (p < len && (s[p] == '+' || s[p] == '-')) {
        int64_t oh, om;
        if (len - p != 6 || s[p + 3] != ':' || digits(s + p + 1, 2, &oh) || digits(s + p + 4, 2, &om) || oh > 23 || om > 59)
            return -1;
        offset_s = (oh * 3600 + om * 60) * (s[p] == '+' ? 1 : -1);
        p = len;
    }
    if (p != len) return -1;
    *us_out = ((int64_t)days * 86400 + hh * 3600 + mm * 60 + ss - offset_s) * 1000000 + frac;
    return 0;
}

static int64_t floor_div(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

mr_status mr_column_format(const mr_column *c, size_t i, mr_buf *out)
{
    if (mr_column_is_null(c, i)) return mr_buf_puts(out, "NULL");
    switch (c->type) {
    case MR_T_BOOL: return mr_buf_puts(out, ((const uint8_t *)c->data)[i] ? "true" : "false");
    case MR_T_INT64: return mr_buf_printf(out, "%lld", (long long)((const int64_t *)c->data)[i]);
    case MR_T_DECIMAL: return mr_decimal_format(((const int64_t *)c->data)[i], c->kind.scale, out);
    case MR_T_FLOAT64:
    case MR_T_FLOAT32: {
        double v = c->type == MR_T_FLOAT64 ? ((const double *)c->data)[i] : (double)((const float *)c->data)[i];
        if (isnan(v)) return mr_buf_puts(out, "nan");
        if (isinf(v)) return mr_buf_puts(out, v > 0 ? "inf" : "-inf");
        char buf[40];
        for (int prec = c->type == MR_T_FLOAT32 ? 6 : 15; prec <= 17; prec++) {
            snprintf(buf, sizeof(buf), "%.*g", prec, v);
            if (c->type == MR_T_FLOAT32 ? (float)strtod(buf, NULL) == (float)v : strtod(buf, NULL) == v) break;
        }
        return mr_buf_puts(out, buf);
    }
    case MR_T_DATE: {
        int64_t y;
        unsigned m, d;
        mr_date_to_civil(((const int32_t *)c->data)[i], &y, &m, &d);
        return mr_buf_printf(out, "%04lld-%02u-%02u", (long long)y, m, d);
    }
    case MR_T_TIMESTAMP: {
        int64_t us = ((const int64_t *)c->data)[i];
        int64_t secs = floor_div(us, 1000000), frac = us - secs * 1000000;
        int64_t days = floor_div(secs, 86400), sod = secs - days * 86400;
        int64_t y;
        unsigned m, d;
        mr_date_to_civil((int32_t)days, &y, &m, &d);
        mr_status rc = mr_buf_printf(out, "%04lld-%02u-%02u %02lld:%02lld:%02lld", (long long)y, m, d, (long long)(sod / 3600),
                                     (long long)(sod / 60 % 60), (long long)(sod % 60));
        if (rc == MR_OK && frac) rc = mr_buf_printf(out, ".%06lld", (long long)frac);
        return rc;
    }
    case MR_T_STRING: {
        size_t len;
        const char *s = mr_column_str(c, i, &len);
        return mr_buf_append(out, s, len);
    }
    default: return mr_buf_puts(out, "NULL");
    }
}

mr_hash128 mr_table_content_hash(const mr_table *t)
{
    mr_hasher *h = NULL;
    mr_hash128 zero = {0, 0};
    if (mr_hasher_new(&h, NULL) != MR_OK) return zero;
    uint64_t n = t->n_rows;
    mr_hasher_update(h, &n, sizeof(n));
    for (size_t j = 0; j < t->n_cols; j++) {
        const mr_column *c = t->cols[j];
        uint32_t type = (uint32_t)c->type;
        mr_hasher_update(h, c->name, strlen(c->name) + 1);
        mr_hasher_update(h, &type, sizeof(type));
        if (c->kind.int_bits | c->kind.flags | c->kind.precision | c->kind.scale) mr_hasher_update(h, &c->kind, sizeof(c->kind)); /* plain: as before kinds */
        size_t w = mr_dtype_width(c->type);
        for (size_t i = 0; i < c->n; i++) {
            uint8_t null = mr_column_is_null(c, i);
            mr_hasher_update(h, &null, 1);
            if (null) continue;
            if (w) {
                mr_hasher_update(h, (const char *)c->data + i * w, w);
            } else {
                size_t len;
                const char *v = mr_column_str(c, i, &len);
                uint64_t l64 = len;
                mr_hasher_update(h, &l64, sizeof(l64));
                mr_hasher_update(h, v, len);
            }
        }
    }
    mr_hash128 r = mr_hasher_digest(h);
    mr_hasher_free(h);
    return r;
}
