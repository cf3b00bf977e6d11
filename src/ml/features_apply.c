/* Applying a fitted transform: the batch path (a table, on the core pool in
 * fixed row blocks) and the single-row path. Both read every value through
 * mr_features_cell / ft_value_from_cell and compute it with ft_eval
 * (features_int.h), so a row gets the same bits either way. */
#include <string.h>

#include "ml/features_int.h"

/* Rows per parallel block: fixed (results never depend on the thread
 * count); 4096 rows keep a block's output columns within L2 for typical
 * widths. */
#define APPLY_BLOCK 4096
/* Per-thread scratch rows are padded to 64 bytes to avoid false sharing. */
#define SCRATCH_ALIGN 8

void mr_features_cell(const mr_column *c, size_t i, mr_cell *out)
{
    out->kind = MR_CELL_NULL;
    out->num = 0.0;
    out->i = 0;
    out->str = NULL;
    out->len = 0;
    if (mr_column_is_null(c, i)) return;
    switch (c->type) {
    case MR_T_BOOL:
        out->kind = MR_CELL_BOOL;
        out->i = ((const uint8_t *)c->data)[i] ? 1 : 0;
        break;
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
        out->kind = MR_CELL_INT;
        out->i = ((const int64_t *)c->data)[i];
        break;
    case MR_T_DATE:
        out->kind = MR_CELL_INT;
        out->i = ((const int32_t *)c->data)[i];
        break;
    case MR_T_FLOAT64:
        out->kind = MR_CELL_NUM;
        out->num = ((const double *)c->data)[i];
        break;
    case MR_T_FLOAT32:
        out->kind = MR_CELL_NUM;
        out->num = (double)((const float *)c->data)[i];
        break;
    case MR_T_DECIMAL:
        out->kind = MR_CELL_NUM;
        out->num = mr_decimal_to_f64(((const int64_t *)c->data)[i], c->kind.scale);
        break;
    case MR_T_STRING:
        out->kind = MR_CELL_STR;
        out->str = mr_column_str(c, i, &out->len);
        break;
    default:
        break;
    }
}

typedef struct apply_ctx {
    const mr_features *f;
    const mr_column **in; /* per program */
    double **out;         /* per output column */
    double *scratch;      /* n_threads * stride */
    size_t stride;
} apply_ctx;

static void apply_range(void *vctx, size_t begin, size_t end, int tid)
{
    const apply_ctx *a = vctx;
    const mr_features *f = a->f;
    double *sc = a->scratch + (size_t)tid * a->stride;
    char keybuf[MR__ML_KEYBUF];
    for (size_t k = 0; k < f->n_cols; k++) {
        const ft_col *fc = &f->cols[k];
        const mr_column *col = a->in[k];
        double *const *out = a->out + fc->out_base;
        for (size_t i = begin; i < end; i++) {
            mr_cell cell;
            ft_val v;
            mr_features_cell(col, i, &cell);
            if (ft_value_from_cell(fc, &cell, keybuf, &v) != 0) v.missing = 1; /* excluded by bind() */
            ft_eval(fc, &v, sc);
            for (uint32_t j = 0; j < fc->n_out; j++) out[j][i] = sc[j];
        }
    }
}

static mr_status bind(const mr_features *f, const mr_table *t, const mr_column **in, mr_error *err)
{
    for (size_t k = 0; k < f->n_cols; k++) {
        const ft_col *fc = &f->cols[k];
        const mr_column *c = mr_table_column_hint(t, k, fc->name);
        if (!c) return mr__ml_err_no_column(err, t, "features: input column", fc->name);
        mr_dtype ty = c->type;
        int ok = fc->categorical ? (ty == MR_T_STRING || ty == MR_T_INT64 || ty == MR_T_BOOL) : mr__ml_is_numeric(ty);
        if (!ok) {
            mr_status rc = MR_ERR(err, MR_E_SCHEMA, "features: column '%s' is %s here but %s (%s) when fitted", fc->name,
                                  mr_dtype_name(ty), fc->categorical ? "categorical" : "numeric",
                                  mr_dtype_name((mr_dtype)fc->train_type));
            mr_error_key(err, fc->name);
            return rc;
        }
        in[k] = c;
    }
    return MR_OK;
}

mr_status mr_features_apply(const mr_features *f, const mr_table *t, mr_table **out, mr_error *err)
{
    mr_status rc = MR_OK;
    size_t n = t->n_rows;
    const mr_column **in = NULL;
    double **cols = NULL, *scratch = NULL;
    mr_table *res = NULL;
    *out = NULL;
    if (f->n_cols && !(in = mr_calloc(f->n_cols, sizeof(*in)))) goto oom;
    if ((rc = bind(f, t, in, err)) != MR_OK) goto fail;
    if ((rc = mr_table_new(&res, err)) != MR_OK) goto fail;
    if (f->n_out && !(cols = mr_calloc(f->n_out, sizeof(*cols)))) goto oom;
    for (size_t j = 0; j < f->n_out; j++) {
        mr_column *c = NULL;
        if ((rc = mr_column_new(f->outs[j].name, MR_T_FLOAT64, n, &c, err)) != MR_OK) goto fail;
        if ((rc = mr_column_reserve(c, n ? n : 1)) != MR_OK) {
            mr_column_free(c);
            rc = MR_ERR(err, rc, "features: cannot allocate %zu rows", n);
            goto fail;
        }
        c->n = n;
        if (n) memset(c->data, 0, n * sizeof(double));
        cols[j] = c->data;
        if ((rc = mr_table_add_column(res, c, err)) != MR_OK) goto fail;
    }
    res->n_rows = n;
    size_t stride = (f->max_out + SCRATCH_ALIGN - 1) / SCRATCH_ALIGN * SCRATCH_ALIGN;
    size_t threads = (size_t)mr_pool_threads();
    if (stride == 0) stride = SCRATCH_ALIGN;
    if (threads > SIZE_MAX / stride) goto oom;
    if (!(scratch = mr_calloc(threads * stride, sizeof(double)))) goto oom;
    apply_ctx a = {.f = f, .in = in, .out = cols, .scratch = scratch, .stride = stride};
    mr_parallel_for(n, APPLY_BLOCK, apply_range, &a);
    *out = res;
    res = NULL;
    goto done;
oom:
    rc = MR_ERR(err, MR_E_NOMEM, "features: out of memory applying the transform");
fail:
done:
    mr_table_free(res);
    mr_free(in);
    mr_free(cols);
    mr_free(scratch);
    return rc;
}

mr_status mr_features_apply_row(const mr_features *f, const mr_row_view *row, double *out_vec, mr_error *err)
{
    if (!row || row->n_cells != f->n_cols)
        return MR_ERR(err, MR_E_INVALID_ARG, "features: row has %zu cells, the transform takes %zu inputs",
                      row ? row->n_cells : 0, f->n_cols);
    char keybuf[MR__ML_KEYBUF];
    for (size_t k = 0; k < f->n_cols; k++) {
        const ft_col *fc = &f->cols[k];
        ft_val v;
        if (ft_value_from_cell(fc, &row->cells[k], keybuf, &v) != 0) {
            mr_status rc = MR_ERR(err, MR_E_INVALID_ARG, "features: input '%s' is %s; got a value of another kind",
                                  fc->name, fc->categorical ? "categorical (string or integer)" : "numeric");
            mr_error_key(err, fc->name);
            return rc;
        }
        ft_eval(fc, &v, out_vec + fc->out_base);
    }
    return MR_OK;
}
