/* Transform helpers shared by join and aggregation: the parallel-for wrapper,
 * row-key encoding into comparable bytes with xxh3-64 hashes, and row
 * copies (with NULL rows for unmatched left-join rows). */
#include "transform_int.h"

#include <math.h>
#include <xxhash.h>

typedef struct serial_job {
    mr_range_fn fn;
    void *ctx;
} serial_job;

void mr__xf_parallel(int threads, size_t n, size_t block, mr_range_fn fn, void *ctx)
{
    if (n == 0) return;
    if (threads != 1) {
        mr_parallel_for(n, block, fn, ctx);
        return;
    }
    for (size_t b = 0; b < n; b += block) fn(ctx, b, b + block < n ? b + block : n, 0);
}

static size_t key_width(mr_dtype t)
{
    switch (t) {
    case MR_T_BOOL: return 1;
    case MR_T_DATE: return 4;
    case MR_T_STRING: return 4; /* length prefix */
    default: return 8;
    }
}

typedef struct kctx {
    xf_keys *k;
    const mr_column *const *cols;
    size_t n_cols;
} kctx;

/* Pass 1: off[i + 1] = encoded length of row i. */
static void k_lengths(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    kctx *c = vctx;
    for (size_t i = begin; i < end; i++) {
        uint64_t len = 0;
        for (size_t j = 0; j < c->n_cols; j++) {
            const mr_column *col = c->cols[j];
            len += 1;
            if (mr_column_is_null(col, i)) continue;
            len += key_width(col->type);
            if (col->type == MR_T_STRING) {
                size_t sl;
                mr_column_str(col, i, &sl);
                len += sl;
            }
        }
        c->k->off[i + 1] = len;
    }
}


/* Pass 2: bytes, hashes and null flags. */
static void k_encode(void *vctx, size_t begin, size_t end, int tid)
{
    (void)tid;
    kctx *c = vctx;
    xf_keys *k = c->k;
    for (size_t i = begin; i < end; i++) {
        uint8_t *p = k->buf + k->off[i];
        uint8_t any_null = 0;
        for (size_t j = 0; j < c->n_cols; j++) {
            const mr_column *col = c->cols[j];
            if (mr_column_is_null(col, i)) {
                *p++ = 0;
                any_null = 1;
                continue;
            }
            *p++ = 1;
            switch (col->type) {
            case MR_T_BOOL: *p++ = ((const uint8_t *)col->data)[i] ? 1 : 0; break;
            case MR_T_DATE:
                mr_le_put32(p, (uint32_t)((const int32_t *)col->data)[i]);
                p += 4;
                break;
            case MR_T_FLOAT64:
            case MR_T_FLOAT32: {
                double f = col->type == MR_T_FLOAT64 ? ((const double *)col->data)[i] : ((const float *)col->data)[i];
                uint64_t u;
                if (f == 0) f = 0.0;
                memcpy(&u, &f, 8);
                if (isnan(f)) u = UINT64_C(0x7ff8000000000000);
                mr_le_put64(p, u);
                p += 8;
                break;
            }
            case MR_T_STRING: {
                size_t sl;
                const char *s = mr_column_str(col, i, &sl);
                mr_le_put32(p, (uint32_t)sl);
                memcpy(p + 4, s, sl);
                p += 4 + sl;
                break;
            }
            default:
                mr_le_put64(p, (uint64_t)((const int64_t *)col->data)[i]);
                p += 8;
                break;
            }
        }
        k->has_null[i] = any_null;
        k->hash[i] = XXH3_64bits(k->buf + k->off[i], k->off[i + 1] - k->off[i]);
    }
}

void mr__xf_keys_free(xf_keys *k)
{
    if (!k) return;
    mr_free(k->off);
    mr_free(k->buf);
    mr_free(k->hash);
    mr_free(k->has_null);
    memset(k, 0, sizeof(*k));
}

mr_status mr__xf_keys_build(xf_keys *k, const mr_column *const *cols, size_t n_cols, size_t n_rows, int threads,
                            mr_error *err)
{
    memset(k, 0, sizeof(*k));
    k->n = n_rows;
    for (size_t j = 0; j < n_cols; j++)
        if (cols[j]->type == MR_T_STRING && cols[j]->n != n_rows)
            return MR_ERR(err, MR_E_INTERNAL, "key column '%s' has %zu rows, expected %zu", cols[j]->name, cols[j]->n,
                          n_rows);
    if (n_rows > SIZE_MAX / 8 - 1) return MR_ERR(err, MR_E_LIMIT, "too many rows for a key index");
    k->off = mr_calloc(n_rows + 1, sizeof(uint64_t));
    k->hash = mr_calloc(n_rows ? n_rows : 1, sizeof(uint64_t));
    k->has_null = mr_calloc(n_rows ? n_rows : 1, 1);
    if (!k->off || !k->hash || !k->has_null) goto nomem;
    kctx c = {k, cols, n_cols};
    mr__xf_parallel(threads, n_rows, XF_BLOCK, k_lengths, &c);
    for (size_t i = 0; i < n_rows; i++) {
        if (k->off[i + 1] > UINT64_MAX - k->off[i]) goto toobig;
        k->off[i + 1] += k->off[i];
    }
    if (k->off[n_rows] > SIZE_MAX) goto toobig;
    k->buf = mr_malloc(k->off[n_rows] ? (size_t)k->off[n_rows] : 1);
    if (!k->buf) goto nomem;
    mr__xf_parallel(threads, n_rows, XF_BLOCK, k_encode, &c);
    return MR_OK;
nomem:
    mr__xf_keys_free(k);
    return MR_ERR(err, MR_E_NOMEM, "out of memory encoding keys of %zu rows", n_rows);
toobig:
    mr__xf_keys_free(k);
    return MR_ERR(err, MR_E_LIMIT, "keys of %zu rows are too large to index", n_rows);
}

mr_status mr__xf_append_row(mr_column *dst, const mr_column *src, size_t i)
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
        size_t len;
        const char *s = mr_column_str(src, i, &len);
        return mr_column_append_str(dst, s, len);
    }
    default: return mr_column_append_null(dst);
    }
}

mr_status mr__xf_take_nullable(const mr_column *c, const uint32_t *idx, size_t n, mr_column **out, mr_error *err)
{
    mr_column *d = NULL;
    mr_status rc = mr_column_new_like(c, NULL, n, &d, err);
    for (size_t k = 0; rc == MR_OK && k < n; k++)
        rc = idx[k] == XF_NONE ? mr_column_append_null(d) : mr__xf_append_row(d, c, idx[k]);
    if (rc != MR_OK) {
        mr_column_free(d);
        return MR_ERR(err, rc, "out of memory copying column '%s'", c->name);
    }
    *out = d;
    return MR_OK;
}
