/* Fitting a features spec on a training table: resolving which steps apply
 * to which columns (explicit lists, selectors, types), then fitting each
 * column's chain of steps in order on that column's values as the earlier
 * steps left them, producing one ft_col program per input. Also the
 * out-of-fold target encoding of the training rows.
 *
 * Out-of-fold target encoding. Row i belongs to fold xxh3(seed, i) % K. For
 * fold f, the statistics (label sum and count per category, and the prior =
 * mean label) come from the rows of the other K-1 folds only, and the row's
 * value is (sum + m*prior) / (count + m) with m = smoothing, or the prior
 * when the category has no labelled row outside fold f. A row's own label is
 * therefore never part of its own encoding: on a label unrelated to the
 * category, the encoding carries no signal about the row's label. New data
 * (mr_features_apply) uses the statistics of all training rows. */
#include <stdlib.h>
#include <string.h>

#include "ml/features_int.h"

enum { K_SKIP = 0, K_NUM = 1, K_CAT = 2, K_OTHER = 3 };

typedef struct colplan {
    const mr_column *col;
    int kind;         /* K_* */
    int is_label;
    int forced_cat;   /* INT64/BOOL named by an encoding step */
    int dropped;
    int encoded;      /* an encoding step has been added */
    int enc_step;     /* its ft_step_kind, when encoded */
    int indicator;    /* an impute with indicator has been added */
    int kept;         /* listed under keep (mr_features_spec_set_keep) */
    int kept_only;    /* kept and not a feature: no program */
    size_t named_step; /* first step naming the column in its list; SIZE_MAX: none */
    size_t named_ci;   /* the name's index in that list */
    size_t n_chain;
    size_t *chain;    /* step indices, in order */
} colplan;

typedef struct fitctx {
    const mr_features_spec *spec;
    const mr_table *t;
    const char *label;
    mr_error *err;
    colplan *plans;
    int want_oof;
    double **oof;     /* per program (fitted column): out-of-fold values, or NULL */
} fitctx;

static int is_encoding(ft_step_kind k)
{
    return k == FT_STEP_ONEHOT || k == FT_STEP_ORDINAL || k == FT_STEP_HASH || k == FT_STEP_TARGET;
}

static mr_status step_err(fitctx *c, const ft_step *st, size_t ci, mr_status code, const char *msg, const char *col)
{
    mr_status rc = MR_ERR(c->err, code, "features: %s: column '%s' %s", mr__ft_step_name(st->kind), col, msg);
    long line = st->line, cc = st->col;
    if (st->sel == FT_SEL_LIST && ci < st->n_cols) {
        line = st->col_lines[ci];
        cc = st->col_cols[ci];
    }
    mr_error_at(c->err, c->spec->source, line, cc);
    mr_error_key(c->err, col);
    return rc;
}

static mr_status missing_col(fitctx *c, const char *what, const char *name, long line, long col)
{
    mr_status rc = mr__ml_err_no_column(c->err, c->t, what, name);
    mr_error_at(c->err, c->spec->source, line, col);
    return rc;
}

/* ---- resolution ---------------------------------------------------------- */

static int step_takes_numeric(const ft_step *st)
{
    switch (st->kind) {
    case FT_STEP_IMPUTE:
    case FT_STEP_STANDARDIZE:
    case FT_STEP_MINMAX:
    case FT_STEP_LOG1P:
    case FT_STEP_CLIP:
    case FT_STEP_BUCKETIZE:
    case FT_STEP_DROP: return 1;
    default: return 0;
    }
}

static int step_takes_categorical(const ft_step *st)
{
    if (st->kind == FT_STEP_IMPUTE) return st->strategy == FT_MOST_FREQUENT || st->strategy == FT_CONSTANT;
    return is_encoding(st->kind) || st->kind == FT_STEP_DROP;
}

static mr_status add_to_chain(fitctx *c, size_t s, size_t j, size_t ci, int explicit_)
{
    const ft_step *st = &c->spec->steps[s];
    colplan *p = &c->plans[j];
    const char *name = p->col->name;
    if (p->dropped) {
        if (!explicit_) return MR_OK;
        return step_err(c, st, ci, MR_E_SCHEMA, "was dropped by an earlier step", name);
    }
    if (p->encoded) {
        if (!explicit_) return MR_OK;
        return step_err(c, st, ci, MR_E_SCHEMA, "is already encoded by an earlier step (an encoding must be a column's last step)",
                        name);
    }
    if (p->kind == K_NUM && !step_takes_numeric(st)) {
        if (!explicit_) return MR_OK;
        return step_err(c, st, ci, MR_E_SCHEMA, "is a float column; this step takes string or integer columns", name);
    }
    if (p->kind == K_CAT && !step_takes_categorical(st)) {
        if (!explicit_) return MR_OK;
        return step_err(c, st, ci, MR_E_SCHEMA,
                        st->kind == FT_STEP_IMPUTE ? "is categorical; impute it with most_frequent or constant"
                                                   : "is categorical; this step takes numeric columns",
                        name);
    }
    if (st->kind == FT_STEP_DROP) {
        p->dropped = 1;
        return MR_OK;
    }
    if (st->kind == FT_STEP_IMPUTE && st->indicator) {
        if (p->indicator) return step_err(c, st, ci, MR_E_SCHEMA, "already has a missing indicator", name);
        p->indicator = 1;
    }
    if (p->kind == K_NUM && st->kind == FT_STEP_IMPUTE && st->strategy == FT_CONSTANT && !st->has_fill_num &&
        st->has_fill_str)
        return step_err(c, st, ci, MR_E_SCHEMA, "is numeric; the constant must be a number", name);
    if (is_encoding(st->kind)) {
        p->encoded = 1;
        p->enc_step = (int)st->kind;
    }
    size_t *ch = mr_realloc(p->chain, (p->n_chain + 1) * sizeof(size_t));
    if (!ch) return MR_ERR(c->err, MR_E_NOMEM, "features: out of memory");
    p->chain = ch;
    p->chain[p->n_chain++] = s;
    if (explicit_ && p->named_step == SIZE_MAX) {
        p->named_step = s;
        p->named_ci = ci;
    }
    return MR_OK;
}

static int is_label_name(const fitctx *c, const char *name)
{
    if (c->label && strcmp(c->label, name) == 0) return 1;
    for (size_t s = 0; s < c->spec->n_steps; s++) {
        const ft_step *st = &c->spec->steps[s];
        if (st->kind == FT_STEP_TARGET && st->label && strcmp(st->label, name) == 0) return 1;
    }
    return 0;
}

/* ---- every column accounted for ---------------------------------------------
 * A column of the training table is a feature input, a label, kept (copied
 * unchanged by the caller) or dropped by a step; none is lost without a word.
 * A column with no program (a string nobody encodes, a date or timestamp)
 * that is neither kept nor dropped is an error naming it. A kept column
 * is not a feature unless a step encodes it into columns of other names
 * (onehot, hash, target_encode): its own name is taken by the copy. */

/* Is text a whole number (blanks around allowed)? */
static int looks_numeric(const char *s, size_t len)
{
    char buf[64];
    if (len == 0 || len >= sizeof(buf)) return 0;
    memcpy(buf, s, len);
    buf[len] = '\0';
    char *end = NULL;
    (void)strtod(buf, &end);
    while (end && (*end == ' ' || *end == '\t')) end++;
    return end && end != buf && *end == '\0';
}

static mr_status unaccounted(fitctx *c, const colplan *p)
{
    const char *name = p->col->name;
    mr_status rc;
    if (p->kind == K_OTHER) {
        rc = MR_ERR(c->err, MR_E_SCHEMA,
                    "features: column '%s' is a %s column and steps take numeric or string columns, so it would be lost",
                    name, mr_dtype_name(p->col->type));
        mr_error_hint(c->err,
                      "leave it out deliberately with `- drop: {columns: [%s]}`, copy it unchanged with `keep: [%s]`, or "
                      "derive a number from it in a transform stage first",
                      name, name);
    } else {
        /* A string column: say so when most of its values are numbers (one
         * stray token turns a numeric column into strings). */
        size_t n_val = 0, n_num = 0, first_bad = SIZE_MAX;
        const char *bad_s = NULL;
        size_t bad_len = 0;
        for (size_t i = 0; i < p->col->n; i++) {
            if (mr_column_is_null(p->col, i)) continue;
            size_t len = 0;
            const char *s = mr_column_str(p->col, i, &len);
            n_val++;
            if (looks_numeric(s, len)) n_num++;
            else if (first_bad == SIZE_MAX) first_bad = i, bad_s = s, bad_len = len;
        }
        if (n_num > 0 && 2 * n_num > n_val && first_bad != SIZE_MAX)
            rc = MR_ERR(c->err, MR_E_SCHEMA,
                        "features: column '%s' is a string column that no step encodes (%zu of its %zu values are "
                        "numbers, but row %zu holds \"%.*s\"); encode it with onehot, ordinal, hash or target_encode, "
                        "or exclude it",
                        name, n_num, n_val, first_bad + 1, (int)(bad_len > 40 ? 40 : bad_len), bad_s);
        else
            rc = MR_ERR(c->err, MR_E_SCHEMA,
                        "features: column '%s' is a string column that no step encodes; encode it with onehot, ordinal, "
                        "hash or target_encode, or exclude it",
                        name);
        mr_error_hint(c->err,
                      "`- drop: {columns: [%s]}` leaves it out of the outputs, `keep: [%s]` copies it unchanged (not a "
                      "feature)%s",
                      name, name, n_num > 0 && 2 * n_num > n_val ? "; if it is numeric, clean or type it upstream" : "");
    }
    mr_error_at(c->err, c->spec->source, 0, 0);
    mr_error_key(c->err, name);
    return rc;
}

static mr_status kept_conflict(fitctx *c, const colplan *p)
{
    const ft_step *st = &c->spec->steps[p->named_step];
    const char *name = p->col->name;
    mr_status rc = step_err(c, st, p->named_ci, MR_E_SCHEMA,
                            "is under keep (copied unchanged, under its own name, into every output), so it cannot also "
                            "be a feature of that name",
                            name);
    mr_error_hint(c->err,
                  "to keep '%s' as an id only, take it out of this step's columns; to use it as a feature, take it out "
                  "of keep",
                  name);
    return rc;
}

static int has_program(const colplan *p)
{
    if (p->dropped || p->kept_only || p->kind == K_SKIP || p->kind == K_OTHER) return 0;
    return p->kind == K_NUM || p->encoded;
}

static mr_status account(fitctx *c)
{
    for (size_t j = 0; j < c->t->n_cols; j++) {
        colplan *p = &c->plans[j];
        if (p->kind == K_SKIP || p->dropped) continue;
        int none = !has_program(p);
        if (!p->kept) {
            if (none) return unaccounted(c, p);
            continue;
        }
        /* numeric programs and ordinal codes keep the column's name */
        int same_name = !none && (p->kind == K_NUM || p->enc_step == FT_STEP_ORDINAL);
        if (same_name && p->named_step != SIZE_MAX) return kept_conflict(c, p);
        if (none || same_name) p->kept_only = 1;
    }
    return MR_OK;
}

static mr_status resolve(fitctx *c)
{
    const mr_table *t = c->t;
    mr_status rc;
    if (c->label && mr_table_column_index(t, c->label) < 0)
        return mr__ml_err_no_column(c->err, t, "features: label column", c->label);
    for (size_t j = 0; j < t->n_cols; j++) {
        colplan *p = &c->plans[j];
        p->col = t->cols[j];
        p->is_label = is_label_name(c, p->col->name);
        mr_dtype ty = p->col->type;
        p->kind = p->is_label ? K_SKIP
                  : ty == MR_T_STRING ? K_CAT
                  : mr__ml_is_numeric(ty) ? K_NUM
                                          : K_OTHER;
        p->named_step = SIZE_MAX;
    }
    for (size_t k = 0; k < c->spec->n_keep; k++) {
        ssize_t j = mr_table_column_index(t, c->spec->keep[k]);
        if (j < 0)
            return missing_col(c, "features: keep: column", c->spec->keep[k], c->spec->keep_lines[k],
                               c->spec->keep_cols[k]);
        c->plans[j].kept = 1;
    }
    /* Pass A: explicit names exist, are not labels, and fix the kind of
     * integer columns named by an encoding step. */
    for (size_t s = 0; s < c->spec->n_steps; s++) {
        const ft_step *st = &c->spec->steps[s];
        if (st->kind == FT_STEP_TARGET) {
            const char *lab = st->label ? st->label : c->label;
            if (!lab) {
                rc = MR_ERR(c->err, MR_E_INVALID_ARG, "features: target_encode needs a label (give 'label' or a training label)");
                mr_error_at(c->err, c->spec->source, st->line, st->col);
                return rc;
            }
            ssize_t li = mr_table_column_index(t, lab);
            if (li < 0) return missing_col(c, "features: target_encode label", lab, st->line, st->col);
            if (!mr__ml_is_numeric(t->cols[li]->type)) {
                rc = MR_ERR(c->err, MR_E_SCHEMA, "features: target_encode label '%s' is %s; it must be numeric (0/1 or a number)",
                            lab, mr_dtype_name(t->cols[li]->type));
                mr_error_at(c->err, c->spec->source, st->line, st->col);
                return rc;
            }
        }
        if (st->sel != FT_SEL_LIST) continue;
        for (size_t i = 0; i < st->n_cols; i++) {
            ssize_t j = mr_table_column_index(t, st->cols[i]);
            if (j < 0) return missing_col(c, "features: column", st->cols[i], st->col_lines[i], st->col_cols[i]);
            colplan *p = &c->plans[j];
            if (p->is_label) return step_err(c, st, i, MR_E_SCHEMA, "is a label; labels are never features", st->cols[i]);
            if (p->kind == K_OTHER && st->kind != FT_STEP_DROP)
                return step_err(c, st, i, MR_E_SCHEMA, "is a date/timestamp column; steps take numeric or string columns",
                                st->cols[i]);
            mr_dtype ty = p->col->type;
            if (is_encoding(st->kind) && (ty == MR_T_INT64 || ty == MR_T_BOOL)) p->forced_cat = 1;
        }
    }
    for (size_t j = 0; j < t->n_cols; j++)
        if (c->plans[j].forced_cat) c->plans[j].kind = K_CAT;
    /* Pass B: chains, in step order. */
    for (size_t s = 0; s < c->spec->n_steps; s++) {
        const ft_step *st = &c->spec->steps[s];
        if (st->sel == FT_SEL_LIST) {
            for (size_t i = 0; i < st->n_cols; i++) {
                size_t j = (size_t)mr_table_column_index(t, st->cols[i]);
                if (c->plans[j].kind == K_OTHER) {
                    c->plans[j].dropped = 1; /* drop of a date column */
                    continue;
                }
                if ((rc = add_to_chain(c, s, j, i, 1)) != MR_OK) return rc;
            }
            continue;
        }
        for (size_t j = 0; j < t->n_cols; j++) {
            colplan *p = &c->plans[j];
            if (p->kind == K_SKIP || p->kind == K_OTHER) continue;
            if (st->sel == FT_SEL_NUMERIC && p->kind != K_NUM) continue;
            if (st->sel == FT_SEL_CATEGORICAL && p->kind != K_CAT) continue;
            if ((rc = add_to_chain(c, s, j, (size_t)-1, 0)) != MR_OK) return rc;
        }
    }
    return account(c);
}

/* ---- numeric fitting ------------------------------------------------------ */

static int dbl_cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Non-NaN lane values, sorted. *m_out = their count. */
static mr_status sorted_values(const double *x, size_t n, double **out, size_t *m_out)
{
    double *s = mr_malloc((n ? n : 1) * sizeof(double));
    if (!s) return MR_E_NOMEM;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(x[i])) s[m++] = x[i];
    if (m) qsort(s, m, sizeof(double), dbl_cmp);
    *out = s;
    *m_out = m;
    return MR_OK;
}

/* numpy.percentile(..., method="linear") at q in [0, 1], reproduced
 * operation for operation (virtual index (n-1)*q, clamped to the ends, then
 * numpy's _lerp, which interpolates from the upper end when gamma >= 0.5) so
 * that bucket edges equal scikit-learn's KBinsDiscretizer bit for bit.
 * s: m >= 1 sorted values. */
static double np_percentile(const double *s, size_t m, double q)
{
    double vi = (double)(m - 1) * q;
    if (vi >= (double)(m - 1)) return s[m - 1];
    if (vi < 0) return s[0];
    double prev = floor(vi);
    double gamma = vi - prev;
    double a = s[(size_t)prev], b = s[(size_t)prev + 1];
    double d = b - a;
    if (gamma >= 0.5) return b - d * (1.0 - gamma);
    return a + d * gamma;
}

static mr_status fit_num_op(fitctx *c, const ft_step *st, double *x, size_t n, ft_op *op)
{
    mr_status rc = MR_OK;
    double *s = NULL;
    size_t m = 0;
    memset(op, 0, sizeof(*op));
    switch (st->kind) {
    case FT_STEP_IMPUTE:
        op->kind = FT_OP_IMPUTE;
        op->indicator = (uint8_t)st->indicator;
        if (st->strategy == FT_CONSTANT) {
            op->a = st->has_fill_num ? st->fill_num : 0.0;
            break;
        }
        if ((rc = sorted_values(x, n, &s, &m)) != MR_OK) goto oom;
        if (m == 0) {
            op->a = 0.0; /* all missing: documented fallback */
        } else if (st->strategy == FT_MEAN) {
            double sum = 0.0;
            for (size_t i = 0; i < n; i++)
                if (!isnan(x[i])) sum += x[i];
            op->a = sum / (double)m;
        } else if (st->strategy == FT_MEDIAN) {
            op->a = m % 2 ? s[m / 2] : (s[m / 2 - 1] + s[m / 2]) / 2.0;
        } else {
            size_t best = 0, best_n = 0;
            for (size_t i = 0; i < m;) {
                size_t k = i;
                while (k < m && s[k] == s[i]) k++;
                if (k - i > best_n) best = i, best_n = k - i;
                i = k;
            }
            op->a = s[best];
        }
        break;
    case FT_STEP_STANDARDIZE: {
        op->kind = FT_OP_STANDARDIZE;
        double sum = 0.0, lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (!isnan(x[i])) {
                sum += x[i];
                m++;
                if (x[i] < lo) lo = x[i];
                if (x[i] > hi) hi = x[i];
            }
        double mean = m ? sum / (double)m : 0.0, ss = 0.0;
        for (size_t i = 0; i < n; i++)
            if (!isnan(x[i])) ss += (x[i] - mean) * (x[i] - mean);
        op->a = mean;
        op->b = m && lo != hi ? sqrt(ss / (double)m) : 1.0; /* constant column: scale 1, like scikit-learn */
        if (!(op->b > 0.0) || !isfinite(op->b)) op->b = 1.0;
        break;
    }
    case FT_STEP_MINMAX: {
        op->kind = FT_OP_MINMAX;
        double lo = INFINITY, hi = -INFINITY;
        for (size_t i = 0; i < n; i++)
            if (!isnan(x[i])) {
                m++;
                if (x[i] < lo) lo = x[i];
                if (x[i] > hi) hi = x[i];
            }
        op->a = m ? lo : 0.0;
        op->b = m && hi > lo ? hi - lo : 1.0;
        if (!isfinite(op->b)) op->b = 1.0;
        break;
    }
    case FT_STEP_LOG1P:
        op->kind = FT_OP_LOG1P;
        break;
    case FT_STEP_CLIP:
        op->kind = FT_OP_CLIP;
        op->a = st->lo;
        op->b = st->hi;
        break;
    case FT_STEP_BUCKETIZE: {
        op->kind = FT_OP_BUCKETIZE;
        if ((rc = sorted_values(x, n, &s, &m)) != MR_OK) goto oom;
        if (m == 0) break; /* no edges: every value -> bin 0 */
        uint32_t nb = st->n_bins;
        double *e = mr_malloc(((size_t)nb + 1) * sizeof(double));
        if (!e) goto oom;
        double step = 100.0 / (double)nb; /* numpy.linspace(0, 100, nb + 1) */
        size_t ne = 0;
        double prev = 0.0;
        for (uint32_t k = 0; k <= nb; k++) {
            double q = k == nb ? 100.0 : (double)k * step;
            double v = np_percentile(s, m, q / 100.0);
            /* scikit-learn drops an edge within 1e-8 of the previous computed one */
            if (k == 0 || v - prev > 1e-8) e[ne++] = v;
            prev = v;
        }
        /* keep the inner edges e[1 .. ne-2] */
        op->n_edges = ne >= 2 ? (uint32_t)(ne - 2) : 0;
        if (op->n_edges) {
            memmove(e, e + 1, op->n_edges * sizeof(double));
            op->edges = e;
        } else {
            mr_free(e);
        }
        break;
    }
    default:
        rc = MR_ERR(c->err, MR_E_INTERNAL, "features: step %s is not numeric", mr__ft_step_name(st->kind));
        break;
    }
    mr_free(s);
    return rc;
oom:
    mr_free(s);
    return MR_ERR(c->err, MR_E_NOMEM, "features: out of memory");
}

/* ---- categorical fitting --------------------------------------------------- */

typedef struct catlane {
    mr__keymap km;   /* distinct keys (+ fill values) */
    uint32_t *id;    /* per row; UINT32_MAX = missing */
    size_t n;
} catlane;

#define MISSING_ID UINT32_MAX

static mr_status lane_counts(const catlane *L, uint64_t **out)
{
    uint64_t *cnt = mr_calloc(L->km.n ? L->km.n : 1, sizeof(uint64_t));
    if (!cnt) return MR_E_NOMEM;
    for (size_t i = 0; i < L->n; i++)
        if (L->id[i] != MISSING_ID) cnt[L->id[i]]++;
    *out = cnt;
    return MR_OK;
}

typedef struct rank_ent {
    uint64_t count;
    const char *key;
    size_t len;
    uint32_t id;
} rank_ent;

static int rank_by_count(const void *a, const void *b)
{
    const rank_ent *x = a, *y = b;
    if (x->count != y->count) return x->count > y->count ? -1 : 1;
    return mr__ml_bytes_cmp(x->key, x->len, y->key, y->len);
}

static int rank_by_key(const void *a, const void *b)
{
    const rank_ent *x = a, *y = b;
    return mr__ml_bytes_cmp(x->key, x->len, y->key, y->len);
}

/* Ranks the ids with count > 0 by (count desc, key asc), keeps the first
 * limit (0 = all), and returns them sorted by key. */
static mr_status top_categories(const catlane *L, const uint64_t *cnt, uint32_t limit, rank_ent **out, size_t *n_out)
{
    rank_ent *r = mr_calloc(L->km.n ? L->km.n : 1, sizeof(rank_ent));
    if (!r) return MR_E_NOMEM;
    size_t m = 0;
    for (size_t id = 0; id < L->km.n; id++) {
        if (!cnt[id]) continue;
        r[m].count = cnt[id];
        r[m].key = mr__keymap_key(&L->km, id, &r[m].len);
        r[m].id = (uint32_t)id;
        m++;
    }
    if (m) qsort(r, m, sizeof(*r), rank_by_count);
    if (limit && m > limit) m = limit;
    if (m) qsort(r, m, sizeof(*r), rank_by_key);
    *out = r;
    *n_out = m;
    return MR_OK;
}

static mr_status set_vocab(ft_col *fc, const rank_ent *r, size_t m)
{
    if (m > UINT32_MAX - 1) return MR_E_LIMIT;
    fc->n_vocab = (uint32_t)m;
    if (!m) return MR_OK;
    fc->vocab = mr_calloc(m, sizeof(char *));
    fc->vocab_len = mr_calloc(m, sizeof(size_t));
    if (!fc->vocab || !fc->vocab_len) return MR_E_NOMEM;
    for (size_t k = 0; k < m; k++) {
        fc->vocab[k] = mr_strndup(r[k].key, r[k].len);
        if (!fc->vocab[k]) return MR_E_NOMEM;
        fc->vocab_len[k] = r[k].len;
    }
    return MR_OK;
}

static mr_status fit_target(fitctx *c, const ft_step *st, const catlane *L, ft_col *fc, double **oof_out)
{
    mr_status rc = MR_OK;
    const char *lab = st->label ? st->label : c->label;
    const mr_column *lc = mr_table_column(c->t, lab);
    size_t n = L->n, nk = L->km.n ? L->km.n : 1, K = st->folds;
    double m = st->smoothing;
    double *y = mr_malloc((n ? n : 1) * sizeof(double));
    double *sum = mr_calloc(nk, sizeof(double)), *fsum = NULL;
    uint64_t *cnt = mr_calloc(nk, sizeof(uint64_t)), *fcnt = NULL;
    uint32_t *fold = NULL;
    rank_ent *r = NULL;
    double *oof = NULL;
    if (!y || !sum || !cnt) goto oom;
    double tot = 0.0;
    uint64_t tot_n = 0;
    for (size_t i = 0; i < n; i++) {
        y[i] = mr__ml_cell_num(lc, i);
        if (isnan(y[i])) continue;
        tot += y[i];
        tot_n++;
        if (L->id[i] != MISSING_ID) {
            sum[L->id[i]] += y[i];
            cnt[L->id[i]]++;
        }
    }
    fc->prior = tot_n ? tot / (double)tot_n : 0.0;
    size_t nv = 0;
    if ((rc = top_categories(L, cnt, 0, &r, &nv)) != MR_OK) goto oom;
    if ((rc = set_vocab(fc, r, nv)) != MR_OK) goto oom;
    if (nv && !(fc->te = mr_calloc(nv, sizeof(double)))) goto oom;
    for (size_t k = 0; k < nv; k++) {
        uint32_t id = r[k].id;
        fc->te[k] = (sum[id] + m * fc->prior) / ((double)cnt[id] + m);
    }
    if (oof_out) {
        /* per-fold sums: fsum[f * nk + id]; out-of-fold = total - in-fold */
        if (nk > SIZE_MAX / sizeof(double) / K) {
            rc = MR_E_LIMIT;
            goto oom;
        }
        fsum = mr_calloc(K * nk, sizeof(double));
        fcnt = mr_calloc(K * nk, sizeof(uint64_t));
        fold = mr_malloc((n ? n : 1) * sizeof(uint32_t));
        oof = mr_malloc((n ? n : 1) * sizeof(double));
        double ftot[FT_MAX_FOLDS] = {0};
        uint64_t ftot_n[FT_MAX_FOLDS] = {0};
        if (!fsum || !fcnt || !fold || !oof) goto oom;
        MR_ASSERT(K <= FT_MAX_FOLDS);
        for (size_t i = 0; i < n; i++) {
            fold[i] = (uint32_t)(mr__ml_row_hash(st->seed, i) % K);
            if (isnan(y[i])) continue;
            ftot[fold[i]] += y[i];
            ftot_n[fold[i]]++;
            if (L->id[i] != MISSING_ID) {
                fsum[fold[i] * nk + L->id[i]] += y[i];
                fcnt[fold[i] * nk + L->id[i]]++;
            }
        }
        for (size_t i = 0; i < n; i++) {
            size_t f = fold[i];
            uint64_t pn = tot_n - ftot_n[f];
            double prior = pn ? (tot - ftot[f]) / (double)pn : fc->prior;
            uint32_t id = L->id[i];
            uint64_t cn = id == MISSING_ID ? 0 : cnt[id] - fcnt[f * nk + id];
            if (cn == 0) {
                oof[i] = prior;
            } else {
                double s = sum[id] - fsum[f * nk + id];
                oof[i] = (s + m * prior) / ((double)cn + m);
            }
        }
        *oof_out = oof;
        oof = NULL;
    }
    goto done;
oom:
    if (rc == MR_OK) rc = MR_E_NOMEM;
    rc = MR_ERR(c->err, rc, "features: target_encode: out of memory");
done:
    mr_free(y);
    mr_free(sum);
    mr_free(cnt);
    mr_free(fsum);
    mr_free(fcnt);
    mr_free(fold);
    mr_free(oof);
    mr_free(r);
    return rc;
}

static mr_status fit_cat_step(fitctx *c, const ft_step *st, catlane *L, ft_col *fc, ft_op *op_out, int *is_op,
                              double **oof_out)
{
    mr_status rc = MR_OK;
    uint64_t *cnt = NULL;
    rank_ent *r = NULL;
    size_t nv = 0;
    *is_op = 0;
    switch (st->kind) {
    case FT_STEP_IMPUTE: {
        memset(op_out, 0, sizeof(*op_out));
        op_out->kind = FT_OP_IMPUTE_CAT;
        op_out->indicator = (uint8_t)st->indicator;
        *is_op = 1;
        const char *fill = "missing_value";
        size_t fill_len = strlen(fill);
        if (st->strategy == FT_CONSTANT) {
            if (st->has_fill_str) fill = st->fill_str, fill_len = strlen(st->fill_str);
        } else {
            if ((rc = lane_counts(L, &cnt)) != MR_OK) goto oom;
            if ((rc = top_categories(L, cnt, 0, &r, &nv)) != MR_OK) goto oom;
            size_t best = SIZE_MAX;
            for (size_t k = 0; k < nv; k++) /* sorted by key: the first max wins ties */
                if (best == SIZE_MAX || r[k].count > r[best].count) best = k;
            if (best != SIZE_MAX) fill = r[best].key, fill_len = r[best].len;
        }
        op_out->str = mr_strndup(fill, fill_len);
        op_out->str_len = fill_len;
        if (!op_out->str) goto oom;
        uint32_t fid;
        if ((rc = mr__keymap_add(&L->km, op_out->str, fill_len, 0, &fid)) != MR_OK) goto oom;
        for (size_t i = 0; i < L->n; i++)
            if (L->id[i] == MISSING_ID) L->id[i] = fid;
        break;
    }
    case FT_STEP_ONEHOT:
    case FT_STEP_ORDINAL:
        fc->enc = st->kind == FT_STEP_ONEHOT ? FT_ENC_ONEHOT : FT_ENC_ORDINAL;
        fc->other = st->kind == FT_STEP_ONEHOT ? (uint8_t)st->other : 1;
        if ((rc = lane_counts(L, &cnt)) != MR_OK) goto oom;
        if ((rc = top_categories(L, cnt, st->kind == FT_STEP_ONEHOT ? st->top_k : st->max_categories, &r, &nv)) != MR_OK)
            goto oom;
        if ((rc = set_vocab(fc, r, nv)) != MR_OK) goto oom;
        break;
    case FT_STEP_HASH:
        fc->enc = FT_ENC_HASH;
        fc->hash_n = st->n_features;
        fc->hash_seed = st->seed;
        fc->hash_signed = (uint8_t)st->hash_signed;
        break;
    case FT_STEP_TARGET:
        fc->enc = FT_ENC_TARGET;
        rc = fit_target(c, st, L, fc, oof_out);
        break;
    default:
        rc = MR_ERR(c->err, MR_E_INTERNAL, "features: step %s is not categorical", mr__ft_step_name(st->kind));
        break;
    }
    mr_free(cnt);
    mr_free(r);
    return rc;
oom:
    mr_free(cnt);
    mr_free(r);
    if (rc == MR_OK) rc = MR_E_NOMEM;
    return MR_ERR(c->err, rc, "features: out of memory");
}

/* Fits the chain of plan p into fc (name, kind and type already set). */
static mr_status fit_column(fitctx *c, const colplan *p, ft_col *fc, double **oof_out)
{
    mr_status rc = MR_OK;
    size_t n = c->t->n_rows;
    double *x = NULL;
    catlane L;
    mr__keymap_init(&L.km);
    L.id = NULL;
    L.n = n;
    if (p->n_chain && !(fc->ops = mr_calloc(p->n_chain, sizeof(ft_op)))) goto oom;
    if (!fc->categorical) {
        if (!(x = mr_malloc((n ? n : 1) * sizeof(double)))) goto oom;
        for (size_t i = 0; i < n; i++) x[i] = mr__ml_cell_num(p->col, i);
        for (size_t k = 0; k < p->n_chain; k++) {
            ft_op *op = &fc->ops[fc->n_ops];
            if ((rc = fit_num_op(c, &c->spec->steps[p->chain[k]], x, n, op)) != MR_OK) goto done;
            fc->n_ops++;
            int miss = 0;
            for (size_t i = 0; i < n; i++) x[i] = ft_num_op(op, x[i], &miss);
        }
        goto done;
    }
    if (!(L.id = mr_malloc((n ? n : 1) * sizeof(uint32_t)))) goto oom;
    char buf[MR__ML_KEYBUF];
    for (size_t i = 0; i < n; i++) {
        const char *s = NULL;
        size_t len = 0;
        if (mr__ml_cell_key(p->col, i, buf, &s, &len) <= 0) {
            L.id[i] = MISSING_ID;
            continue;
        }
        if ((rc = mr__keymap_add(&L.km, s, len, 1, &L.id[i])) != MR_OK) goto oom;
    }
    for (size_t k = 0; k < p->n_chain; k++) {
        int is_op = 0;
        if ((rc = fit_cat_step(c, &c->spec->steps[p->chain[k]], &L, fc, &fc->ops[fc->n_ops], &is_op, oof_out)) != MR_OK)
            goto done;
        if (is_op) fc->n_ops++;
    }
    goto done;
oom:
    if (rc == MR_OK) rc = MR_E_NOMEM;
    rc = MR_ERR(c->err, rc, "features: out of memory fitting column '%s'", p->col->name);
done:
    mr_free(x);
    mr_free(L.id);
    mr__keymap_free(&L.km);
    return rc;
}

/* ---- driver ---------------------------------------------------------------- */

static mr_status fit_impl(const mr_features_spec *spec, const mr_table *train, const char *label, int want_oof,
                          mr_features **out, double ***oof_out, mr_error *err)
{
    mr_status rc = MR_OK;
    *out = NULL;
    fitctx c = {.spec = spec, .t = train, .label = label, .err = err, .want_oof = want_oof};
    size_t n_prog = 0;
    mr_features *f = mr_calloc(1, sizeof(*f));
    if (!f) return MR_ERR(err, MR_E_NOMEM, "features: out of memory");
    if (train->n_cols && !(c.plans = mr_calloc(train->n_cols, sizeof(colplan)))) goto oom;
    if ((rc = resolve(&c)) != MR_OK) goto fail;
    for (size_t j = 0; j < train->n_cols; j++) n_prog += has_program(&c.plans[j]);
    if (n_prog && !(f->cols = mr_calloc(n_prog, sizeof(ft_col)))) goto oom;
    if (want_oof && n_prog && !(c.oof = mr_calloc(n_prog, sizeof(double *)))) goto oom;
    for (size_t j = 0; j < train->n_cols; j++) {
        colplan *p = &c.plans[j];
        if (!has_program(p)) continue;
        ft_col *fc = &f->cols[f->n_cols];
        fc->categorical = p->kind == K_CAT;
        fc->train_type = (uint8_t)p->col->type;
        if (!(fc->name = mr_strdup(p->col->name))) goto oom;
        f->n_cols++;
        if ((rc = fit_column(&c, p, fc, c.oof ? &c.oof[f->n_cols - 1] : NULL)) != MR_OK) goto fail;
    }
    if ((rc = mr__ft_finish(f, err)) != MR_OK) goto fail;
    *out = f;
    if (oof_out) {
        *oof_out = c.oof;
        c.oof = NULL;
    }
    goto done;
oom:
    rc = MR_ERR(err, MR_E_NOMEM, "features: out of memory");
fail:
    mr_features_free(f);
done:
    if (c.oof) {
        for (size_t k = 0; k < n_prog; k++) mr_free(c.oof[k]);
        mr_free(c.oof);
    }
    if (c.plans) {
        for (size_t j = 0; j < train->n_cols; j++) mr_free(c.plans[j].chain);
        mr_free(c.plans);
    }
    return rc;
}

mr_status mr_features_fit(const mr_features_spec *spec, const mr_table *train, const char *label, mr_features **out,
                          mr_error *err)
{
    return fit_impl(spec, train, label, 0, out, NULL, err);
}

mr_status mr_features_fit_apply_train(const mr_features_spec *spec, const mr_table *train, const char *label,
                                      mr_features **fitted_out, mr_table **train_out, mr_error *err)
{
    double **oof = NULL;
    mr_features *f = NULL;
    mr_table *t = NULL;
    *fitted_out = NULL;
    *train_out = NULL;
    mr_status rc = fit_impl(spec, train, label, 1, &f, &oof, err);
    if (rc != MR_OK) return rc;
    size_t n_prog = f->n_cols;
    if ((rc = mr_features_apply(f, train, &t, err)) != MR_OK) goto done;
    for (size_t k = 0; k < f->n_cols; k++) {
        if (!oof || !oof[k]) continue;
        const ft_col *fc = &f->cols[k];
        MR_ASSERT(fc->enc == FT_ENC_TARGET);
        memcpy(t->cols[fc->out_base]->data, oof[k], train->n_rows * sizeof(double));
    }
    *fitted_out = f;
    *train_out = t;
    f = NULL;
done:
    if (oof) {
        for (size_t k = 0; k < n_prog; k++) mr_free(oof[k]);
        mr_free(oof);
    }
    mr_features_free(f);
    return rc;
}
