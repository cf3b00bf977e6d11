/* Row -> part assignment for dataset splits (random, stratified, group,
 * time) and materialisation of the parts; see include/millrace/split.h for
 * the exact rules. Nothing here reads files or YAML text: specs arrive as a
 * struct or an mr_value tree. */
#include "millrace/split.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ml/ml_int.h"

#define ROW_BLOCK 65536 /* mr_parallel_for block: big enough to amortise dispatch */

const char *mr_split_method_name(mr_split_method m)
{
    switch (m) {
    case MR_SPLIT_RANDOM: return "random";
    case MR_SPLIT_STRATIFIED: return "stratified";
    case MR_SPLIT_GROUP: return "group";
    case MR_SPLIT_TIME: return "time";
    }
    return "?";
}

void mr_split_spec_init(mr_split_spec *s)
{
    memset(s, 0, sizeof(*s));
}

mr_status mr_split_spec_add_part(mr_split_spec *s, const char *name, double fraction)
{
    if (s->n_parts >= MR_SPLIT_MAX_PARTS) return MR_E_LIMIT;
    s->names[s->n_parts] = name;
    s->fractions[s->n_parts] = fraction;
    s->n_parts++;
    return MR_OK;
}

int mr_split_part_index(const mr_split_spec *s, const char *name)
{
    for (size_t k = 0; k < s->n_parts; k++)
        if (s->names[k] && strcmp(s->names[k], name) == 0) return (int)k;
    return -1;
}

/* ---- validation --------------------------------------------------------- */

static int uses_fractions(const mr_split_spec *s)
{
    return !(s->method == MR_SPLIT_TIME && s->n_cutoffs > 0);
}

/* Where a spec check failed, so that mr_split_spec_from_value can point at
 * the YAML node: the key ("parts", "method", "cutoffs") and, for parts and
 * cut-offs, the item (-1: the key's value as a whole). */
typedef struct blame {
    const char *key;
    int item;
} blame;

static mr_status blamed(blame *b, const char *key, int item, mr_status rc)
{
    if (b) {
        b->key = key;
        b->item = item;
    }
    return rc;
}

static mr_status parse_cutoff(mr_dtype t, const char *text, double *out, mr_error *err);

/* Cut-offs without a column: all dates/timestamps or all numbers (a column
 * has one type), strictly increasing as that kind. */
static mr_status check_cutoffs_static(const mr_split_spec *s, blame *b, mr_error *err)
{
    int all_time = 1, all_num = 1;
    double v;
    for (size_t k = 0; k < s->n_cutoffs; k++) {
        if (!s->cutoffs[k])
            return blamed(b, "cutoffs", (int)k, MR_ERR(err, MR_E_INVALID_ARG, "split: cut-off %zu is missing", k + 1));
        all_time &= parse_cutoff(MR_T_TIMESTAMP, s->cutoffs[k], &v, NULL) == MR_OK;
        all_num &= parse_cutoff(MR_T_FLOAT64, s->cutoffs[k], &v, NULL) == MR_OK;
    }
    if (!all_time && !all_num) {
        int first_time = parse_cutoff(MR_T_TIMESTAMP, s->cutoffs[0], &v, NULL) == MR_OK;
        int first_num = parse_cutoff(MR_T_FLOAT64, s->cutoffs[0], &v, NULL) == MR_OK;
        for (size_t k = 0; k < s->n_cutoffs; k++) {
            int t = parse_cutoff(MR_T_TIMESTAMP, s->cutoffs[k], &v, NULL) == MR_OK;
            int n = parse_cutoff(MR_T_FLOAT64, s->cutoffs[k], &v, NULL) == MR_OK;
            if (!t && !n)
                return blamed(b, "cutoffs", (int)k,
                              MR_ERR(err, MR_E_INVALID_ARG, "split: cut-off \"%s\" is not a date, timestamp or number",
                                     s->cutoffs[k]));
            if ((first_time && !t) || (first_num && !n))
                return blamed(b, "cutoffs", (int)k,
                              MR_ERR(err, MR_E_INVALID_ARG,
                                     "split: cut-off \"%s\" is %s but \"%s\" is %s: a time column has one type",
                                     s->cutoffs[k], t ? "a date or timestamp" : "a number", s->cutoffs[0],
                                     first_time ? "a date or timestamp" : "a number"));
        }
    }
    mr_dtype kind = all_time ? MR_T_TIMESTAMP : MR_T_FLOAT64;
    int also_num = all_time && all_num; /* increasing as either kind is enough */
    double prev = 0, prev_num = 0;
    for (size_t k = 0; k < s->n_cutoffs; k++) {
        double x = 0, xn = 0;
        parse_cutoff(kind, s->cutoffs[k], &x, NULL);
        if (also_num) parse_cutoff(MR_T_FLOAT64, s->cutoffs[k], &xn, NULL);
        if (k && !(x > prev) && !(also_num && xn > prev_num))
            return blamed(b, "cutoffs", (int)k,
                          MR_ERR(err, MR_E_INVALID_ARG, "split: cut-offs must increase (\"%s\" after \"%s\")",
                                 s->cutoffs[k], s->cutoffs[k - 1]));
        prev = x;
        prev_num = xn;
    }
    return MR_OK;
}

/* Everything about s that needs no table. */
static mr_status check_static(const mr_split_spec *s, blame *b, mr_error *err)
{
    if ((unsigned)s->method > MR_SPLIT_TIME)
        return blamed(b, "method", -1, MR_ERR(err, MR_E_INVALID_ARG, "split: unknown method %d", (int)s->method));
    if (s->n_parts < 2 || s->n_parts > MR_SPLIT_MAX_PARTS)
        return blamed(b, "parts", -1,
                      MR_ERR(err, MR_E_INVALID_ARG, "split: needs 2 to %d parts, got %zu", MR_SPLIT_MAX_PARTS, s->n_parts));
    for (size_t k = 0; k < s->n_parts; k++) {
        if (!s->names[k] || !s->names[k][0])
            return blamed(b, "parts", (int)k, MR_ERR(err, MR_E_INVALID_ARG, "split: part %zu has no name", k + 1));
        for (size_t j = 0; j < k; j++)
            if (strcmp(s->names[j], s->names[k]) == 0)
                return blamed(b, "parts", (int)k,
                              MR_ERR(err, MR_E_INVALID_ARG, "split: part name '%s' appears twice", s->names[k]));
    }
    if (uses_fractions(s)) {
        double sum = 0.0;
        for (size_t k = 0; k < s->n_parts; k++) {
            double f = s->fractions[k];
            if (!isfinite(f) || f < 0.0 || f > 1.0)
                return blamed(b, "parts", (int)k,
                              MR_ERR(err, MR_E_INVALID_ARG, "split: fraction of part '%s' is %.17g, not in [0, 1]",
                                     s->names[k], f));
            sum += f;
        }
        if (fabs(sum - 1.0) > MR_SPLIT_FRACTION_TOL)
            return blamed(b, "parts", -1, MR_ERR(err, MR_E_INVALID_ARG, "split: fractions sum to %.12g, not 1", sum));
    }
    const char *need = NULL, *col = NULL;
    switch (s->method) {
    case MR_SPLIT_STRATIFIED: need = "label", col = s->label; break;
    case MR_SPLIT_GROUP: need = "group", col = s->group; break;
    case MR_SPLIT_TIME: need = "time", col = s->time; break;
    default: break;
    }
    if (need && (!col || !col[0])) {
        mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "split: method %s needs a '%s' column",
                              mr_split_method_name(s->method), need);
        mr_error_hint(err, "add '%s: COLUMN'", need);
        return blamed(b, "method", -1, rc);
    }
    if (s->method == MR_SPLIT_TIME && s->n_cutoffs && s->n_cutoffs != s->n_parts - 1)
        return blamed(b, "cutoffs", -1,
                      MR_ERR(err, MR_E_INVALID_ARG, "split: %zu parts need %zu cut-offs, got %zu", s->n_parts,
                             s->n_parts - 1, s->n_cutoffs));
    if (s->method != MR_SPLIT_TIME && s->n_cutoffs)
        return blamed(b, "cutoffs", -1, MR_ERR(err, MR_E_INVALID_ARG, "split: cut-offs apply to method time only"));
    if (s->method == MR_SPLIT_TIME) return check_cutoffs_static(s, b, err);
    return MR_OK;
}

/* Time key of a value in a column of type t: microseconds for DATE and
 * TIMESTAMP (exact in a double up to year ~2255), the value otherwise. */
static mr_status parse_cutoff(mr_dtype t, const char *text, double *out, mr_error *err)
{
    size_t len = strlen(text);
    if (t == MR_T_DATE || t == MR_T_TIMESTAMP) {
        int32_t days;
        int64_t us;
        if (mr_date_parse(text, len, &days) == 0) {
            *out = (double)days * 86400e6;
            return MR_OK;
        }
        if (mr_timestamp_parse(text, len, &us) == 0) {
            *out = (double)us;
            return MR_OK;
        }
        return MR_ERR(err, MR_E_INVALID_ARG, "split: cut-off \"%s\" is not a date or timestamp", text);
    }
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (len == 0 || *end || errno || !isfinite(v))
        return MR_ERR(err, MR_E_INVALID_ARG, "split: cut-off \"%s\" is not a number", text);
    *out = v;
    return MR_OK;
}

static double time_key(const mr_column *c, size_t i)
{
    if (mr_column_is_null(c, i)) return NAN;
    switch (c->type) {
    case MR_T_DATE: return (double)((const int32_t *)c->data)[i] * 86400e6;
    default: return mr__ml_cell_num(c, i);
    }
}

static mr_status find_col(const mr_table *t, const char *what, const char *name, const mr_column **out, mr_error *err)
{
    *out = mr_table_column(t, name);
    if (!*out) return mr__ml_err_no_column(err, t, what, name);
    return MR_OK;
}

mr_status mr_split_check(const mr_split_spec *s, const mr_table *t, mr_error *err)
{
    mr_status rc = check_static(s, NULL, err);
    if (rc != MR_OK) return rc;
    const mr_column *c = NULL;
    switch (s->method) {
    case MR_SPLIT_STRATIFIED:
        return find_col(t, "split: label column", s->label, &c, err);
    case MR_SPLIT_GROUP:
        if ((rc = find_col(t, "split: group column", s->group, &c, err)) != MR_OK) return rc;
        if (c->type == MR_T_FLOAT64 || c->type == MR_T_FLOAT32 || c->type == MR_T_NULL) {
            MR_ERR(err, MR_E_INVALID_ARG, "split: group column '%s' is %s; use a string, integer, bool, date or timestamp column",
                   s->group, mr_dtype_name(c->type));
            mr_error_key(err, s->group);
            return MR_E_INVALID_ARG;
        }
        return MR_OK;
    case MR_SPLIT_TIME: {
        if ((rc = find_col(t, "split: time column", s->time, &c, err)) != MR_OK) return rc;
        if (c->type != MR_T_DATE && c->type != MR_T_TIMESTAMP && c->type != MR_T_INT64 && c->type != MR_T_FLOAT64 &&
            c->type != MR_T_FLOAT32 && c->type != MR_T_DECIMAL) {
            MR_ERR(err, MR_E_INVALID_ARG, "split: time column '%s' is %s; expected date, timestamp or number", s->time,
                   mr_dtype_name(c->type));
            mr_error_key(err, s->time);
            return MR_E_INVALID_ARG;
        }
        double prev = -INFINITY;
        for (size_t k = 0; k < s->n_cutoffs; k++) {
            double v = 0;
            if (!s->cutoffs[k]) return MR_ERR(err, MR_E_INVALID_ARG, "split: cut-off %zu is missing", k + 1);
            if ((rc = parse_cutoff(c->type, s->cutoffs[k], &v, err)) != MR_OK) return rc;
            if (k && !(v > prev))
                return MR_ERR(err, MR_E_INVALID_ARG, "split: cut-offs must increase (\"%s\" after \"%s\")",
                              s->cutoffs[k], s->cutoffs[k - 1]);
            prev = v;
        }
        return MR_OK;
    }
    default:
        return MR_OK;
    }
}

/* ---- assignment ---------------------------------------------------------- */

typedef struct assign_ctx {
    const mr_split_spec *s;
    const mr_column *col;
    double cum[MR_SPLIT_MAX_PARTS]; /* cumulative fractions; cum[n_parts-1] treated as 1 */
    uint8_t *out;
} assign_ctx;

static inline uint8_t bucket(const assign_ctx *c, double u)
{
    size_t k = 0;
    while (k + 1 < c->s->n_parts && u >= c->cum[k]) k++;
    return (uint8_t)k;
}

static void random_range(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    assign_ctx *c = vctx;
    for (size_t i = begin; i < end; i++) c->out[i] = bucket(c, mr__ml_u01(mr__ml_row_hash(c->s->seed, i)));
}

/* The null group hashes with this seed offset (golden-ratio constant) so it
 * cannot coincide with the empty string's bucket by construction. */
#define NULL_GROUP_TWEAK 0x9e3779b97f4a7c15ULL

static void group_range(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    assign_ctx *c = vctx;
    char buf[MR__ML_KEYBUF];
    for (size_t i = begin; i < end; i++) {
        const char *p = NULL;
        size_t len = 0;
        uint64_t h;
        if (mr__ml_cell_key(c->col, i, buf, &p, &len) > 0) h = mr__ml_hash64(p, len, c->s->seed);
        else h = mr__ml_hash64("", 0, c->s->seed ^ NULL_GROUP_TWEAK);
        c->out[i] = bucket(c, mr__ml_u01(h));
    }
}

typedef struct strat_row {
    uint32_t cls;
    uint32_t idx;
    uint64_t h;
} strat_row;

static int strat_cmp(const void *a, const void *b)
{
    const strat_row *x = a, *y = b;
    if (x->cls != y->cls) return x->cls < y->cls ? -1 : 1;
    if (x->h != y->h) return x->h < y->h ? -1 : 1;
    return (x->idx > y->idx) - (x->idx < y->idx);
}

static mr_status assign_stratified(assign_ctx *c, size_t n, mr_error *err)
{
    mr_status rc = MR_OK;
    mr__keymap km;
    mr__keymap_init(&km);
    strat_row *rows = n ? mr_calloc(n, sizeof(*rows)) : NULL;
    if (n && !rows) {
        rc = MR_ERR(err, MR_E_NOMEM, "split: out of memory");
        goto done;
    }
    const mr_column *col = c->col;
    char buf[MR__ML_KEYBUF];
    for (size_t i = 0; i < n; i++) {
        const char *p = NULL;
        size_t len = 0;
        uint32_t id = UINT32_MAX;
        int k = mr__ml_cell_key(col, i, buf, &p, &len);
        if (k < 0) {
            double v = mr__ml_cell_num(col, i);
            if (isnan(v)) {
                k = 0;
            } else {
                if (v == 0.0) v = 0.0; /* -0 and 0 are one class */
                memcpy(buf, &v, sizeof(v));
                p = buf;
                len = sizeof(v);
                k = 1;
            }
        }
        if (k > 0 && (rc = mr__keymap_add(&km, p, len, 1, &id)) != MR_OK) {
            MR_ERR(err, rc, "split: too many label classes");
            goto done;
        }
        rows[i].cls = id; /* nulls (UINT32_MAX) sort after every class */
        rows[i].idx = (uint32_t)i;
        rows[i].h = mr__ml_row_hash(c->s->seed, i);
    }
    if (n) qsort(rows, n, sizeof(*rows), strat_cmp);
    for (size_t a = 0; a < n;) {
        size_t b = a;
        while (b < n && rows[b].cls == rows[a].cls) b++;
        size_t m = b - a, lo = 0;
        for (size_t k = 0; k < c->s->n_parts; k++) {
            size_t hi = m;
            if (k + 1 < c->s->n_parts) {
                double cut = floor(c->cum[k] * (double)m + 0.5);
                hi = cut < 0 ? 0 : cut > (double)m ? m : (size_t)cut;
                if (hi < lo) hi = lo;
            }
            for (size_t r = lo; r < hi; r++) c->out[rows[a + r].idx] = (uint8_t)k;
            lo = hi;
        }
        a = b;
    }
done:
    mr_free(rows);
    mr__keymap_free(&km);
    return rc;
}

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static mr_status assign_time(assign_ctx *c, size_t n, mr_error *err)
{
    mr_status rc = MR_OK;
    const mr_split_spec *s = c->s;
    double *keys = n ? mr_calloc(n, sizeof(double)) : NULL;
    double cut[MR_SPLIT_MAX_PARTS];
    if (n && !keys) return MR_ERR(err, MR_E_NOMEM, "split: out of memory");
    for (size_t i = 0; i < n; i++) {
        keys[i] = time_key(c->col, i);
        if (isnan(keys[i])) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "split: time column '%s' is null at row %zu; filter or impute it first",
                        s->time, i + 1);
            if (err) err->row = (long)(i + 1);
            mr_error_key(err, s->time);
            goto done;
        }
    }
    if (s->n_cutoffs) {
        for (size_t k = 0; k < s->n_cutoffs; k++)
            if ((rc = parse_cutoff(c->col->type, s->cutoffs[k], &cut[k], err)) != MR_OK) goto done;
    } else {
        double *sorted = n ? mr_malloc(n * sizeof(double)) : NULL;
        if (n && !sorted) {
            rc = MR_ERR(err, MR_E_NOMEM, "split: out of memory");
            goto done;
        }
        if (n) memcpy(sorted, keys, n * sizeof(double));
        if (n) qsort(sorted, n, sizeof(double), dbl_cmp);
        for (size_t k = 0; k + 1 < s->n_parts; k++) {
            double pos = floor(c->cum[k] * (double)n + 0.5);
            cut[k] = pos >= (double)n ? INFINITY : sorted[(size_t)pos];
        }
        mr_free(sorted);
    }
    size_t n_cut = s->n_parts - 1;
    for (size_t i = 0; i < n; i++) {
        size_t k = 0;
        while (k < n_cut && keys[i] >= cut[k]) k++;
        c->out[i] = (uint8_t)k;
    }
done:
    mr_free(keys);
    return rc;
}

mr_status mr_split_assign(const mr_split_spec *s, const mr_table *t, uint8_t *part_out, mr_error *err)
{
    mr_status rc = mr_split_check(s, t, err);
    if (rc != MR_OK) return rc;
    size_t n = t->n_rows;
    if (n > UINT32_MAX - 1) return MR_ERR(err, MR_E_LIMIT, "split: %zu rows is over the 2^32-1 row limit", n);
    assign_ctx c = {.s = s, .out = part_out};
    double acc = 0.0;
    for (size_t k = 0; k < s->n_parts; k++) {
        acc += s->fractions[k];
        c.cum[k] = acc;
    }
    switch (s->method) {
    case MR_SPLIT_RANDOM:
        mr_parallel_for(n, ROW_BLOCK, random_range, &c);
        return MR_OK;
    case MR_SPLIT_GROUP:
        c.col = mr_table_column(t, s->group);
        mr_parallel_for(n, ROW_BLOCK, group_range, &c);
        return MR_OK;
    case MR_SPLIT_STRATIFIED:
        c.col = mr_table_column(t, s->label);
        return assign_stratified(&c, n, err);
    case MR_SPLIT_TIME:
        c.col = mr_table_column(t, s->time);
        return assign_time(&c, n, err);
    }
    return MR_ERR(err, MR_E_INTERNAL, "split: unreachable method");
}

mr_status mr_split_table(const mr_split_spec *s, const mr_table *t, mr_table **parts_out, mr_error *err)
{
    mr_status rc;
    size_t n = t->n_rows;
    uint8_t *part = NULL;
    uint32_t *idx = NULL;
    size_t count[MR_SPLIT_MAX_PARTS] = {0}, start[MR_SPLIT_MAX_PARTS + 1];
    for (size_t k = 0; k < s->n_parts && k < MR_SPLIT_MAX_PARTS; k++) parts_out[k] = NULL;
    if ((rc = mr_split_check(s, t, err)) != MR_OK) return rc;
    part = n ? mr_malloc(n) : NULL;
    idx = n ? mr_calloc(n, sizeof(uint32_t)) : NULL;
    if (n && (!part || !idx)) {
        rc = MR_ERR(err, MR_E_NOMEM, "split: out of memory");
        goto fail;
    }
    if ((rc = mr_split_assign(s, t, part, err)) != MR_OK) goto fail;
    for (size_t i = 0; i < n; i++) count[part[i]]++;
    start[0] = 0;
    for (size_t k = 0; k < s->n_parts; k++) start[k + 1] = start[k] + count[k];
    for (size_t k = 0; k < s->n_parts; k++) count[k] = start[k];
    for (size_t i = 0; i < n; i++) idx[count[part[i]]++] = (uint32_t)i;
    for (size_t k = 0; k < s->n_parts; k++)
        if ((rc = mr_table_take(t, idx + start[k], start[k + 1] - start[k], &parts_out[k], err)) != MR_OK) goto fail;
    mr_free(part);
    mr_free(idx);
    return MR_OK;
fail:
    for (size_t k = 0; k < s->n_parts; k++) {
        mr_table_free(parts_out[k]);
        parts_out[k] = NULL;
    }
    mr_free(part);
    mr_free(idx);
    return rc;
}

/* ---- spec from YAML ------------------------------------------------------ */

static mr_status at(mr_error *err, const mr_value *v, mr_status rc)
{
    if (v) mr_error_at(err, NULL, v->line, v->col);
    return rc;
}

static mr_status want_str(const mr_value *v, const char *key, const char **out, mr_error *err)
{
    if (!v || v->kind != MR_V_STR || !v->str[0])
        return at(err, v, MR_ERR(err, MR_E_PARSE, "split: '%s' must be a column name", key));
    *out = v->str;
    return MR_OK;
}

mr_status mr_split_spec_from_value(const mr_value *v, mr_split_spec *s, mr_error *err)
{
    static const char *const keys[] = {"method", "parts", "label", "group", "time", "cutoffs", "seed"};
    static const char *const methods[] = {"random", "stratified", "group", "time"};
    mr_status rc;
    mr_split_spec_init(s);
    if (!v || v->kind != MR_V_MAP) return at(err, v, MR_ERR(err, MR_E_PARSE, "split: params must be a mapping"));
    for (size_t i = 0; i < v->n; i++) {
        size_t k = 0;
        while (k < 7 && strcmp(v->keys[i], keys[k]) != 0) k++;
        if (k == 7) {
            MR_ERR(err, MR_E_PARSE, "split: unknown key '%s'", v->keys[i]);
            const char *best = mr_closest(v->keys[i], keys, 7);
            if (best) mr_error_hint(err, "did you mean '%s'?", best);
            mr_error_at(err, NULL, v->key_lines[i], v->key_cols[i]);
            return MR_E_PARSE;
        }
    }
    const mr_value *m = mr_value_get(v, "method");
    if (m) {
        size_t k = 0;
        while (m->kind == MR_V_STR && k < 4 && strcmp(m->str, methods[k]) != 0) k++;
        if (m->kind != MR_V_STR || k == 4) {
            MR_ERR(err, MR_E_PARSE, "split: unknown method '%s' (random, stratified, group, time)",
                   m->str ? m->str : mr_vkind_name(m->kind));
            const char *best = m->kind == MR_V_STR ? mr_closest(m->str, methods, 4) : NULL;
            if (best) mr_error_hint(err, "did you mean '%s'?", best);
            return at(err, m, MR_E_PARSE);
        }
        s->method = (mr_split_method)k;
    }
    const mr_value *p = mr_value_get(v, "parts");
    if (!p) return at(err, v, MR_ERR(err, MR_E_PARSE, "split: 'parts' is required, e.g. {train: 0.8, test: 0.2}"));
    if (p->kind != MR_V_MAP && p->kind != MR_V_SEQ)
        return at(err, p, MR_ERR(err, MR_E_PARSE, "split: 'parts' must map part names to fractions"));
    if (p->n > MR_SPLIT_MAX_PARTS)
        return at(err, p, MR_ERR(err, MR_E_PARSE, "split: at most %d parts", MR_SPLIT_MAX_PARTS));
    for (size_t i = 0; i < p->n; i++) {
        const mr_value *it = p->items[i];
        if (p->kind == MR_V_SEQ) {
            if (it->kind != MR_V_STR) return at(err, it, MR_ERR(err, MR_E_PARSE, "split: part names must be strings"));
            mr_split_spec_add_part(s, it->str, 0.0);
        } else {
            double f;
            if (it->kind == MR_V_INT) f = (double)it->u.i;
            else if (it->kind == MR_V_FLOAT) f = it->u.f;
            else return at(err, it, MR_ERR(err, MR_E_PARSE, "split: fraction of part '%s' must be a number", p->keys[i]));
            if (!(f > 0.0 && f <= 1.0)) {
                MR_ERR(err, MR_E_PARSE, "split: fraction of part '%s' must be in (0, 1], got %s", p->keys[i],
                       it->str ? it->str : "a number outside it");
                if (f == 0.0) mr_error_hint(err, "a part of fraction 0 would be empty: leave it out");
                return at(err, it, MR_E_PARSE);
            }
            mr_split_spec_add_part(s, p->keys[i], f);
        }
    }
    const mr_value *x;
    if ((x = mr_value_get(v, "label")) && (rc = want_str(x, "label", &s->label, err)) != MR_OK) return rc;
    if ((x = mr_value_get(v, "group")) && (rc = want_str(x, "group", &s->group, err)) != MR_OK) return rc;
    if ((x = mr_value_get(v, "time")) && (rc = want_str(x, "time", &s->time, err)) != MR_OK) return rc;
    if ((x = mr_value_get(v, "seed"))) {
        if (x->kind != MR_V_INT || x->u.i < 0)
            return at(err, x, MR_ERR(err, MR_E_PARSE, "split: 'seed' must be a non-negative integer"));
        s->seed = (uint64_t)x->u.i;
    }
    if ((x = mr_value_get(v, "cutoffs"))) {
        if (x->kind != MR_V_SEQ || x->n > MR_SPLIT_MAX_PARTS - 1)
            return at(err, x, MR_ERR(err, MR_E_PARSE, "split: 'cutoffs' must be a list of up to %d dates, timestamps or numbers",
                                     MR_SPLIT_MAX_PARTS - 1));
        for (size_t i = 0; i < x->n; i++) {
            const mr_value *c = x->items[i];
            if (!c->str) return at(err, c, MR_ERR(err, MR_E_PARSE, "split: cut-off %zu must be a scalar", i + 1));
            s->cutoffs[s->n_cutoffs++] = c->str;
        }
    }
    if (p->kind == MR_V_SEQ && !(s->method == MR_SPLIT_TIME && s->n_cutoffs))
        return at(err, p, MR_ERR(err, MR_E_PARSE, "split: 'parts' as a list needs method time with cutoffs; give fractions"));
    blame b = {NULL, -1};
    if ((rc = check_static(s, &b, err)) != MR_OK) {
        /* The node the failed check is about: a part's name (a key of the
         * parts mapping, or an item of the list), a cut-off, else the key's
         * value. Fractions were checked above, at their values. */
        const mr_value *node = b.key ? mr_value_get(v, b.key) : NULL;
        int item = node && b.item >= 0 && (size_t)b.item < node->n;
        if (item && node->kind == MR_V_MAP && node->key_lines)
            mr_error_at(err, NULL, node->key_lines[b.item], node->key_cols[b.item]);
        else if (item && (node->kind == MR_V_MAP || node->kind == MR_V_SEQ))
            node = node->items[b.item];
        return at(err, node ? node : v, rc);
    }
    return MR_OK;
}
