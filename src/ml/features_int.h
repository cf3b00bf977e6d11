/* Internals shared by the features files: the parsed spec, the fitted
 * per-column programs, and THE per-value evaluation (ft_value_from_cell +
 * ft_eval) that both the batch path and the single-row path call, so their
 * results are bit-identical by construction.
 *
 * A fitted transform is one program per input column: an ordered list of
 * value ops (impute, standardize, ...) and a final encoding. Columns never
 * interact, so a program needs nothing but its own input value. */
#ifndef MILLRACE_FEATURES_INT_H
#define MILLRACE_FEATURES_INT_H

#include <math.h>
#include <string.h>

#include "millrace/features.h"
#include "ml/ml_int.h"

/* ---- spec ------------------------------------------------------------------ */
typedef enum ft_step_kind {
    FT_STEP_IMPUTE = 0,
    FT_STEP_STANDARDIZE,
    FT_STEP_MINMAX,
    FT_STEP_LOG1P,
    FT_STEP_CLIP,
    FT_STEP_BUCKETIZE,
    FT_STEP_ONEHOT,
    FT_STEP_ORDINAL,
    FT_STEP_HASH,
    FT_STEP_TARGET,
    FT_STEP_DROP,
    FT_STEP__COUNT
} ft_step_kind;

typedef enum ft_selector { FT_SEL_LIST = 0, FT_SEL_NUMERIC, FT_SEL_CATEGORICAL, FT_SEL_ALL } ft_selector;
typedef enum ft_strategy { FT_MEAN = 0, FT_MEDIAN, FT_MOST_FREQUENT, FT_CONSTANT } ft_strategy;

typedef struct ft_step {
    ft_step_kind kind;
    long line, col;        /* position of the step in the YAML */
    ft_selector sel;
    size_t n_cols;
    char **cols;           /* FT_SEL_LIST */
    long *col_lines, *col_cols;
    /* impute */
    ft_strategy strategy;
    int has_fill_num, has_fill_str;
    double fill_num;
    char *fill_str;
    int indicator;
    /* clip */
    double lo, hi;
    /* bucketize */
    uint32_t n_bins;
    /* onehot / ordinal */
    uint32_t top_k;        /* onehot: 0 = all */
    int other;
    uint32_t max_categories; /* ordinal: 0 = all */
    /* hash */
    uint32_t n_features;
    uint64_t seed;         /* hash, target_encode */
    int hash_signed;
    /* target_encode */
    char *label;           /* NULL = the fit's label */
    uint32_t folds;
    double smoothing;
} ft_step;

struct mr_features_spec {
    char *source;
    size_t n_steps;
    ft_step *steps;
    /* mr_features_spec_set_keep: columns the caller copies unchanged into
     * its outputs (ids kept for joining) */
    size_t n_keep;
    char **keep;
    long *keep_lines, *keep_cols;
};

const char *mr__ft_step_name(ft_step_kind k);

#define FT_MAX_FOLDS 100u /* target_encode folds: 2 .. FT_MAX_FOLDS */

/* ---- fitted programs -------------------------------------------------------
 * Enum values are stored in the artifact: append only. */
typedef enum ft_op_kind {
    FT_OP_IMPUTE = 1,      /* a = fill; indicator */
    FT_OP_STANDARDIZE = 2, /* x = (x - a) / b */
    FT_OP_MINMAX = 3,      /* x = (x - a) / b */
    FT_OP_LOG1P = 4,       /* x = log1p(x) for x > -1, else NaN */
    FT_OP_CLIP = 5,        /* x = min(max(x, a), b) */
    FT_OP_BUCKETIZE = 6,   /* x = #{edges <= x} */
    FT_OP_IMPUTE_CAT = 7,  /* missing key -> str; indicator */
} ft_op_kind;
#define FT_OP_MAX 7

typedef enum ft_enc {
    FT_ENC_NONE = 0,    /* numeric value out */
    FT_ENC_ONEHOT = 1,  /* n_vocab indicators (+ other) */
    FT_ENC_ORDINAL = 2, /* code = vocab index; unseen = n_vocab; missing = NaN */
    FT_ENC_HASH = 3,    /* n_features buckets */
    FT_ENC_TARGET = 4,  /* te[vocab index]; unseen or missing = prior */
} ft_enc;
#define FT_ENC_MAX 4

typedef struct ft_op {
    uint8_t kind;      /* ft_op_kind */
    uint8_t indicator; /* impute: emit name#missing */
    double a, b;
    uint32_t n_edges;  /* bucketize */
    double *edges;     /* bucketize: sorted inner edges */
    char *str;         /* impute_cat fill */
    size_t str_len;
} ft_op;

typedef struct ft_col {
    char *name;
    uint8_t categorical;
    uint8_t train_type;  /* mr_dtype */
    uint32_t n_ops;
    ft_op *ops;
    uint8_t enc;         /* ft_enc */
    uint8_t other;       /* onehot */
    uint8_t hash_signed;
    uint32_t n_vocab;
    char **vocab;        /* sorted bytewise, unique */
    size_t *vocab_len;
    double *te;          /* target: per vocab entry */
    double prior;        /* target */
    uint32_t hash_n;
    uint64_t hash_seed;
    /* derived (not stored) */
    uint32_t n_main;     /* outputs of the encoding */
    uint8_t has_indicator;
    uint32_t n_out;      /* n_main + has_indicator */
    size_t out_base;     /* index of the first output */
} ft_col;

struct mr_features {
    size_t n_cols;
    ft_col *cols;
    mr_features_input *inputs; /* n_cols */
    size_t n_out;
    mr_features_output *outs;
    size_t max_out;            /* largest n_out of a column (scratch size) */
};

/* Fills derived fields, builds inputs/outputs (names), checks name
 * uniqueness. MR_E_SCHEMA on duplicate output names. */
mr_status mr__ft_finish(mr_features *f, mr_error *err);
void mr__ft_col_free(ft_col *c);

/* ---- the per-value code ---------------------------------------------------- */
typedef struct ft_val {
    int missing;
    double x;       /* numeric programs; NaN when missing */
    const char *s;  /* categorical programs */
    size_t len;
} ft_val;

/* Converts a cell to the program's input value. keybuf (MR__ML_KEYBUF bytes)
 * holds integer text. Returns 0, or -1 when the cell kind does not fit. */
static inline int ft_value_from_cell(const ft_col *c, const mr_cell *cell, char *keybuf, ft_val *v)
{
    v->missing = 0;
    v->x = NAN;
    v->s = NULL;
    v->len = 0;
    if (cell->kind == MR_CELL_NULL) {
        v->missing = 1;
        return 0;
    }
    if (!c->categorical) {
        switch (cell->kind) {
        case MR_CELL_NUM: v->x = cell->num; break;
        case MR_CELL_INT:
        case MR_CELL_BOOL: v->x = (double)cell->i; break;
        default: return -1;
        }
        if (isnan(v->x)) v->missing = 1;
        return 0;
    }
    switch (cell->kind) {
    case MR_CELL_STR:
        v->s = cell->str;
        v->len = cell->len;
        return 0;
    case MR_CELL_INT:
        v->len = mr__ml_i64_text(cell->i, keybuf);
        v->s = keybuf;
        return 0;
    case MR_CELL_BOOL:
        v->s = cell->i ? "true" : "false";
        v->len = cell->i ? 4 : 5;
        return 0;
    case MR_CELL_NUM:
        /* JSON numbers: an integral value in int64 range reads as that integer */
        if (cell->num == floor(cell->num) && fabs(cell->num) < 9.2e18) {
            v->len = mr__ml_i64_text((int64_t)cell->num, keybuf);
            v->s = keybuf;
            return 0;
        }
        return -1;
    default: return -1;
    }
}

/* Index of key in the sorted vocabulary, or -1 (binary search). */
static inline int64_t ft_vocab_find(const ft_col *c, const char *s, size_t len)
{
    size_t lo = 0, hi = c->n_vocab;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int r = mr__ml_bytes_cmp(c->vocab[mid], c->vocab_len[mid], s, len);
        if (r == 0) return (int64_t)mid;
        if (r < 0) lo = mid + 1;
        else hi = mid;
    }
    return -1;
}

/* One numeric op on x; *miss records missingness at an impute. */
static inline double ft_num_op(const ft_op *op, double x, int *miss)
{
    switch (op->kind) {
    case FT_OP_IMPUTE:
        if (op->indicator) *miss = isnan(x) != 0;
        return isnan(x) ? op->a : x;
    case FT_OP_STANDARDIZE:
    case FT_OP_MINMAX:
        return (x - op->a) / op->b;
    case FT_OP_LOG1P:
        return x > -1.0 ? log1p(x) : NAN;
    case FT_OP_CLIP:
        if (x < op->a) return op->a;
        if (x > op->b) return op->b;
        return x;
    case FT_OP_BUCKETIZE: {
        if (isnan(x)) return x;
        size_t lo = 0, hi = op->n_edges; /* first edge > x (searchsorted right) */
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (op->edges[mid] <= x) lo = mid + 1;
            else hi = mid;
        }
        return (double)lo;
    }
    default:
        return x;
    }
}

/* Evaluates program c on v into out[0 .. c->n_out). */
static inline void ft_eval(const ft_col *c, const ft_val *v, double *out)
{
    int miss = 0;
    if (!c->categorical) {
        double x = v->missing ? NAN : v->x;
        for (uint32_t k = 0; k < c->n_ops; k++) x = ft_num_op(&c->ops[k], x, &miss);
        out[0] = x;
        if (c->has_indicator) out[1] = miss ? 1.0 : 0.0;
        return;
    }
    int missing = v->missing;
    const char *s = v->s;
    size_t len = v->len;
    for (uint32_t k = 0; k < c->n_ops; k++) {
        const ft_op *op = &c->ops[k];
        if (op->kind == FT_OP_IMPUTE_CAT) {
            if (op->indicator) miss = missing;
            if (missing) {
                s = op->str;
                len = op->str_len;
                missing = 0;
            }
        }
    }
    int64_t idx = -1;
    switch (c->enc) {
    case FT_ENC_ONEHOT:
        for (uint32_t j = 0; j < c->n_main; j++) out[j] = 0.0;
        if (!missing) {
            idx = ft_vocab_find(c, s, len);
            if (idx >= 0) out[idx] = 1.0;
            else if (c->other) out[c->n_vocab] = 1.0;
        }
        break;
    case FT_ENC_ORDINAL:
        if (missing) {
            out[0] = NAN;
        } else {
            idx = ft_vocab_find(c, s, len);
            out[0] = idx >= 0 ? (double)idx : (double)c->n_vocab;
        }
        break;
    case FT_ENC_HASH:
        for (uint32_t j = 0; j < c->n_main; j++) out[j] = 0.0;
        if (!missing) {
            uint64_t h = mr__ml_hash64(s, len, c->hash_seed);
            out[h % c->hash_n] += c->hash_signed && (h >> 63) ? -1.0 : 1.0;
        }
        break;
    case FT_ENC_TARGET:
        idx = missing ? -1 : ft_vocab_find(c, s, len);
        out[0] = idx >= 0 ? c->te[idx] : c->prior;
        break;
    default:
        out[0] = NAN; /* a categorical program always has an encoding */
        break;
    }
    if (c->has_indicator) out[c->n_main] = miss ? 1.0 : 0.0;
}

#endif
