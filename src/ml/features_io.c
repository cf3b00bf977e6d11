/* The fitted transform as an object (output naming, accessors, free) and as
 * an artifact: the versioned "MRFT" binary format, written deterministically
 * and validated field by field on load. docs/features.md, "File format",
 * specifies it byte by byte; keep the two in step. */
#include <stdlib.h>
#include <string.h>

#include "ml/features_int.h"

#define HEADER_LEN 16  /* magic, version, body_len */
#define TRAILER_LEN 8  /* checksum */
#define MAX_HASH_N (1u << 20)
#define MAX_EDGES 65536u

/* ---- object ---------------------------------------------------------------- */

void mr__ft_col_free(ft_col *c)
{
    if (!c) return;
    mr_free(c->name);
    for (uint32_t k = 0; k < c->n_ops && c->ops; k++) {
        mr_free(c->ops[k].edges);
        mr_free(c->ops[k].str);
    }
    mr_free(c->ops);
    for (uint32_t k = 0; k < c->n_vocab && c->vocab; k++) mr_free(c->vocab[k]);
    mr_free(c->vocab);
    mr_free(c->vocab_len);
    mr_free(c->te);
}

void mr_features_free(mr_features *f)
{
    if (!f) return;
    for (size_t k = 0; k < f->n_cols; k++) mr__ft_col_free(&f->cols[k]);
    mr_free(f->cols);
    mr_free(f->inputs);
    for (size_t j = 0; j < f->n_out && f->outs; j++) mr_free((void *)f->outs[j].name);
    mr_free(f->outs);
    mr_free(f);
}

size_t mr_features_n_inputs(const mr_features *f) { return f->n_cols; }
size_t mr_features_n_outputs(const mr_features *f) { return f->n_out; }

const mr_features_input *mr_features_input_at(const mr_features *f, size_t i)
{
    return i < f->n_cols ? &f->inputs[i] : NULL;
}

const mr_features_output *mr_features_output_at(const mr_features *f, size_t j)
{
    return j < f->n_out ? &f->outs[j] : NULL;
}

static char *out_name(const char *base, const char *sep, const char *val, size_t val_len)
{
    mr_buf b;
    mr_buf_init(&b);
    if (mr_buf_puts(&b, base) != MR_OK || mr_buf_puts(&b, sep) != MR_OK ||
        (val_len && mr_buf_append(&b, val, val_len) != MR_OK)) {
        mr_buf_free(&b);
        return NULL;
    }
    if (!b.data) return mr_strdup(""); /* unreachable: base is never empty */
    return b.data;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

mr_status mr__ft_finish(mr_features *f, mr_error *err)
{
    size_t n_out = 0;
    f->max_out = 0;
    for (size_t k = 0; k < f->n_cols; k++) {
        ft_col *c = &f->cols[k];
        c->has_indicator = 0;
        for (uint32_t o = 0; o < c->n_ops; o++)
            if (c->ops[o].indicator) c->has_indicator = 1;
        switch (c->enc) {
        case FT_ENC_ONEHOT: c->n_main = c->n_vocab + (c->other ? 1u : 0u); break;
        case FT_ENC_HASH: c->n_main = c->hash_n; break;
        default: c->n_main = 1; break;
        }
        c->n_out = c->n_main + c->has_indicator;
        c->out_base = n_out;
        if (c->n_out > f->max_out) f->max_out = c->n_out;
        n_out += c->n_out;
    }
    if (f->n_cols && !(f->inputs = mr_calloc(f->n_cols, sizeof(*f->inputs)))) goto oom;
    if (n_out && !(f->outs = mr_calloc(n_out, sizeof(*f->outs)))) goto oom;
    for (size_t k = 0; k < f->n_cols; k++) {
        ft_col *c = &f->cols[k];
        f->inputs[k] = (mr_features_input){.name = c->name, .categorical = c->categorical, .train_type = c->train_type};
        int other_taken = c->enc == FT_ENC_ONEHOT && ft_vocab_find(c, "other", 5) >= 0;
        for (uint32_t j = 0; j < c->n_out; j++) {
            mr_features_output *o = &f->outs[f->n_out];
            char *name = NULL;
            char num[MR__ML_KEYBUF];
            o->source = c->name;
            o->input = k;
            if (j >= c->n_main) {
                name = out_name(c->name, "#missing", NULL, 0);
            } else if (c->enc == FT_ENC_ONEHOT) {
                if (j < c->n_vocab) name = out_name(c->name, "=", c->vocab[j], c->vocab_len[j]);
                else name = out_name(c->name, other_taken ? "=__other__" : "=other", NULL, 0);
            } else if (c->enc == FT_ENC_HASH) {
                size_t len = mr__ml_i64_text(j, num);
                name = out_name(c->name, "#hash", num, len);
            } else if (c->enc == FT_ENC_TARGET) {
                name = out_name(c->name, "#te", NULL, 0);
            } else {
                name = mr_strdup(c->name);
                if (c->enc == FT_ENC_ORDINAL) {
                    o->categorical = 1;
                    o->n_categories = c->n_vocab + 1;
                }
            }
            if (!name) goto oom;
            o->name = name;
            f->n_out++;
        }
    }
    if (f->n_out > 1) {
        const char **names = mr_calloc(f->n_out, sizeof(char *));
        if (!names) goto oom;
        for (size_t j = 0; j < f->n_out; j++) names[j] = f->outs[j].name;
        qsort(names, f->n_out, sizeof(char *), name_cmp);
        for (size_t j = 1; j < f->n_out; j++)
            if (strcmp(names[j - 1], names[j]) == 0) {
                mr_status rc = MR_ERR(err, MR_E_SCHEMA, "features: two outputs are both named '%s'; rename a column",
                                      names[j]);
                mr_free(names);
                return rc;
            }
        mr_free(names);
    }
    return MR_OK;
oom:
    return MR_ERR(err, MR_E_NOMEM, "features: out of memory");
}

/* ---- writer ------------------------------------------------------------------ */

typedef struct wr {
    mr_buf *b;
    mr_status rc;
} wr;

static void put(wr *w, const void *p, size_t n)
{
    if (w->rc == MR_OK && n) w->rc = mr_buf_append(w->b, p, n);
}
static void put_u8(wr *w, uint8_t v)
{
    if (w->rc == MR_OK) w->rc = mr_buf_put_u8(w->b, v);
}
static void put_u32(wr *w, uint32_t v)
{
    if (w->rc == MR_OK) w->rc = mr_buf_put_u32(w->b, v);
}
static void put_u64(wr *w, uint64_t v)
{
    if (w->rc == MR_OK) w->rc = mr_buf_put_u64(w->b, v);
}
static void put_f64(wr *w, double v)
{
    if (w->rc == MR_OK) w->rc = mr_buf_put_f64(w->b, v);
}
static void put_str(wr *w, const char *s, size_t len)
{
    if (len > UINT32_MAX) {
        w->rc = MR_E_LIMIT;
        return;
    }
    put_u32(w, (uint32_t)len);
    put(w, s, len);
}

mr_status mr_features_save(const mr_features *f, mr_buf *out)
{
    size_t start = out->len;
    wr w = {.b = out, .rc = MR_OK};
    put(&w, MR_FEATURES_MAGIC, 4);
    put_u32(&w, MR_FEATURES_VERSION);
    put_u64(&w, 0); /* body_len, patched below */
    size_t body = out->len;
    put_u32(&w, (uint32_t)f->n_cols);
    for (size_t k = 0; k < f->n_cols; k++) {
        const ft_col *c = &f->cols[k];
        put_str(&w, c->name, strlen(c->name));
        put_u8(&w, c->categorical);
        put_u8(&w, c->train_type);
        put_u32(&w, c->n_ops);
        for (uint32_t o = 0; o < c->n_ops; o++) {
            const ft_op *op = &c->ops[o];
            put_u8(&w, op->kind);
            put_u8(&w, op->indicator);
            switch (op->kind) {
            case FT_OP_IMPUTE: put_f64(&w, op->a); break;
            case FT_OP_STANDARDIZE:
            case FT_OP_MINMAX:
            case FT_OP_CLIP:
                put_f64(&w, op->a);
                put_f64(&w, op->b);
                break;
            case FT_OP_BUCKETIZE:
                put_u32(&w, op->n_edges);
                for (uint32_t e = 0; e < op->n_edges; e++) put_f64(&w, op->edges[e]);
                break;
            case FT_OP_IMPUTE_CAT: put_str(&w, op->str, op->str_len); break;
            default: break;
            }
        }
        put_u8(&w, c->enc);
        switch (c->enc) {
        case FT_ENC_ONEHOT:
        case FT_ENC_ORDINAL:
            if (c->enc == FT_ENC_ONEHOT) put_u8(&w, c->other);
            put_u32(&w, c->n_vocab);
            for (uint32_t v = 0; v < c->n_vocab; v++) put_str(&w, c->vocab[v], c->vocab_len[v]);
            break;
        case FT_ENC_HASH:
            put_u32(&w, c->hash_n);
            put_u64(&w, c->hash_seed);
            put_u8(&w, c->hash_signed);
            break;
        case FT_ENC_TARGET:
            put_f64(&w, c->prior);
            put_u32(&w, c->n_vocab);
            for (uint32_t v = 0; v < c->n_vocab; v++) {
                put_str(&w, c->vocab[v], c->vocab_len[v]);
                put_f64(&w, c->te[v]);
            }
            break;
        default: break;
        }
    }
    put_u32(&w, (uint32_t)f->n_out);
    for (size_t j = 0; j < f->n_out; j++) {
        const mr_features_output *o = &f->outs[j];
        put_str(&w, o->name, strlen(o->name));
        put_u32(&w, (uint32_t)o->input);
        put_u8(&w, (uint8_t)o->categorical);
        put_u32(&w, o->n_categories);
    }
    if (w.rc != MR_OK) {
        out->len = start;
        return w.rc;
    }
    uint64_t body_len = out->len - body;
    for (int k = 0; k < 8; k++) out->data[start + 8 + k] = (char)(uint8_t)(body_len >> (8 * k));
    put_u64(&w, mr__ml_hash64(out->data + start, out->len - start, 0));
    if (w.rc != MR_OK) out->len = start;
    return w.rc;
}

/* ---- reader ------------------------------------------------------------------ */

typedef struct rd {
    const uint8_t *p;
    size_t len, off;
    mr_error *err;
    size_t col;       /* column being read, for messages */
    int in_col;
} rd;

static mr_status corrupt(rd *r, const char *what)
{
    if (r->in_col)
        return MR_ERR(r->err, MR_E_CORRUPT, "features artifact: %s (input %zu, at byte %zu)", what, r->col, r->off);
    return MR_ERR(r->err, MR_E_CORRUPT, "features artifact: %s (at byte %zu)", what, r->off);
}

static mr_status need(rd *r, size_t n, const char *field)
{
    if (r->len - r->off < n) {
        char msg[160];
        snprintf(msg, sizeof(msg), "truncated reading %s", field);
        return corrupt(r, msg);
    }
    return MR_OK;
}

static mr_status get_u8(rd *r, const char *field, uint8_t *v)
{
    mr_status rc = need(r, 1, field);
    if (rc == MR_OK) *v = r->p[r->off++];
    return rc;
}

static mr_status get_u32(rd *r, const char *field, uint32_t *v)
{
    mr_status rc = need(r, 4, field);
    if (rc != MR_OK) return rc;
    *v = mr_le_get32(r->p + r->off);
    r->off += 4;
    return MR_OK;
}

static mr_status get_u64(rd *r, const char *field, uint64_t *v)
{
    mr_status rc = need(r, 8, field);
    if (rc != MR_OK) return rc;
    *v = mr_le_get64(r->p + r->off);
    r->off += 8;
    return MR_OK;
}

static mr_status get_f64(rd *r, const char *field, double *v)
{
    uint64_t u;
    mr_status rc = get_u64(r, field, &u);
    if (rc == MR_OK) memcpy(v, &u, 8);
    return rc;
}

/* A length-prefixed string, copied NUL-terminated. */
static mr_status get_str(rd *r, const char *field, char **s, size_t *len_out)
{
    uint32_t len;
    mr_status rc = get_u32(r, field, &len);
    if (rc != MR_OK) return rc;
    if ((rc = need(r, len, field)) != MR_OK) return rc;
    *s = mr_strndup((const char *)r->p + r->off, len);
    if (!*s) return MR_ERR(r->err, MR_E_NOMEM, "features artifact: out of memory");
    r->off += len;
    if (len_out) *len_out = len;
    return MR_OK;
}

/* A count whose items take at least min_item bytes each must fit in what is left. */
static mr_status get_count(rd *r, const char *field, size_t min_item, uint32_t *v)
{
    mr_status rc = get_u32(r, field, v);
    if (rc != MR_OK) return rc;
    if ((uint64_t)*v * min_item > r->len - r->off) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%s %u does not fit in the remaining bytes", field, *v);
        return corrupt(r, msg);
    }
    return MR_OK;
}

static mr_status read_vocab(rd *r, ft_col *c, int with_te)
{
    mr_status rc = get_count(r, "vocabulary size", with_te ? 12 : 4, &c->n_vocab);
    if (rc != MR_OK) return rc;
    uint32_t n = c->n_vocab;
    c->n_vocab = 0;
    if (!n) return MR_OK;
    c->vocab = mr_calloc(n, sizeof(char *));
    c->vocab_len = mr_calloc(n, sizeof(size_t));
    if (with_te) c->te = mr_calloc(n, sizeof(double));
    if (!c->vocab || !c->vocab_len || (with_te && !c->te)) return MR_ERR(r->err, MR_E_NOMEM, "features artifact: out of memory");
    for (uint32_t v = 0; v < n; v++) {
        if ((rc = get_str(r, "vocabulary entry", &c->vocab[v], &c->vocab_len[v])) != MR_OK) return rc;
        c->n_vocab++;
        if (v && mr__ml_bytes_cmp(c->vocab[v - 1], c->vocab_len[v - 1], c->vocab[v], c->vocab_len[v]) >= 0)
            return corrupt(r, "vocabulary is not sorted and unique");
        if (with_te) {
            if ((rc = get_f64(r, "target encoding value", &c->te[v])) != MR_OK) return rc;
            if (!isfinite(c->te[v])) return corrupt(r, "target encoding value is not finite");
        }
    }
    return MR_OK;
}

static mr_status read_op(rd *r, ft_col *c, ft_op *op)
{
    mr_status rc;
    if ((rc = get_u8(r, "op kind", &op->kind)) != MR_OK) return rc;
    if ((rc = get_u8(r, "op indicator flag", &op->indicator)) != MR_OK) return rc;
    if (op->kind < 1 || op->kind > FT_OP_MAX) return corrupt(r, "unknown op kind");
    if (op->indicator > 1 || (op->indicator && op->kind != FT_OP_IMPUTE && op->kind != FT_OP_IMPUTE_CAT))
        return corrupt(r, "bad indicator flag");
    if ((op->kind == FT_OP_IMPUTE_CAT) != (c->categorical != 0))
        return corrupt(r, c->categorical ? "numeric op on a categorical input" : "categorical op on a numeric input");
    switch (op->kind) {
    case FT_OP_IMPUTE:
        if ((rc = get_f64(r, "impute value", &op->a)) != MR_OK) return rc;
        if (isnan(op->a)) return corrupt(r, "impute value is NaN");
        break;
    case FT_OP_STANDARDIZE:
    case FT_OP_MINMAX:
        if ((rc = get_f64(r, "scaler offset", &op->a)) != MR_OK) return rc;
        if ((rc = get_f64(r, "scaler scale", &op->b)) != MR_OK) return rc;
        if (!isfinite(op->a) || !isfinite(op->b) || !(op->b > 0.0)) return corrupt(r, "scaler parameters out of range");
        break;
    case FT_OP_CLIP:
        if ((rc = get_f64(r, "clip lo", &op->a)) != MR_OK) return rc;
        if ((rc = get_f64(r, "clip hi", &op->b)) != MR_OK) return rc;
        if (isnan(op->a) || isnan(op->b) || op->a > op->b) return corrupt(r, "clip bounds out of order");
        break;
    case FT_OP_BUCKETIZE:
        if ((rc = get_count(r, "bucket edge count", 8, &op->n_edges)) != MR_OK) return rc;
        if (op->n_edges > MAX_EDGES) return corrupt(r, "too many bucket edges");
        if (op->n_edges && !(op->edges = mr_calloc(op->n_edges, sizeof(double))))
            return MR_ERR(r->err, MR_E_NOMEM, "features artifact: out of memory");
        for (uint32_t e = 0; e < op->n_edges; e++) {
            if ((rc = get_f64(r, "bucket edge", &op->edges[e])) != MR_OK) return rc;
            if (isnan(op->edges[e]) || (e && op->edges[e] < op->edges[e - 1])) return corrupt(r, "bucket edges not sorted");
        }
        break;
    case FT_OP_IMPUTE_CAT:
        if ((rc = get_str(r, "impute string", &op->str, &op->str_len)) != MR_OK) return rc;
        break;
    default:
        break;
    }
    return MR_OK;
}

static mr_status read_col(rd *r, ft_col *c)
{
    mr_status rc;
    size_t name_len = 0;
    if ((rc = get_str(r, "input name", &c->name, &name_len)) != MR_OK) return rc;
    if (name_len == 0 || strlen(c->name) != name_len) return corrupt(r, "input name is empty or holds a NUL byte");
    if ((rc = get_u8(r, "input kind", &c->categorical)) != MR_OK) return rc;
    if ((rc = get_u8(r, "input type", &c->train_type)) != MR_OK) return rc;
    if (c->categorical > 1) return corrupt(r, "bad input kind");
    if (c->train_type > MR_T_TIMESTAMP) return corrupt(r, "bad input type");
    uint32_t n_ops;
    if ((rc = get_count(r, "op count", 2, &n_ops)) != MR_OK) return rc;
    if (n_ops && !(c->ops = mr_calloc(n_ops, sizeof(ft_op)))) return MR_ERR(r->err, MR_E_NOMEM, "features artifact: out of memory");
    int indicators = 0;
    for (uint32_t o = 0; o < n_ops; o++) {
        c->n_ops++;
        if ((rc = read_op(r, c, &c->ops[o])) != MR_OK) return rc;
        indicators += c->ops[o].indicator;
    }
    if (indicators > 1) return corrupt(r, "more than one missing indicator");
    if ((rc = get_u8(r, "encoding", &c->enc)) != MR_OK) return rc;
    if (c->enc > FT_ENC_MAX) return corrupt(r, "unknown encoding");
    if ((c->enc == FT_ENC_NONE) != (c->categorical == 0))
        return corrupt(r, c->categorical ? "categorical input without an encoding" : "encoding on a numeric input");
    switch (c->enc) {
    case FT_ENC_ONEHOT:
        if ((rc = get_u8(r, "onehot other flag", &c->other)) != MR_OK) return rc;
        if (c->other > 1) return corrupt(r, "bad onehot other flag");
        if ((rc = read_vocab(r, c, 0)) != MR_OK) return rc;
        if (c->n_vocab + (uint32_t)c->other == 0) return corrupt(r, "onehot with no output");
        break;
    case FT_ENC_ORDINAL:
        c->other = 1;
        if ((rc = read_vocab(r, c, 0)) != MR_OK) return rc;
        break;
    case FT_ENC_HASH:
        if ((rc = get_u32(r, "hash width", &c->hash_n)) != MR_OK) return rc;
        if ((rc = get_u64(r, "hash seed", &c->hash_seed)) != MR_OK) return rc;
        if ((rc = get_u8(r, "hash signed flag", &c->hash_signed)) != MR_OK) return rc;
        if (c->hash_n < 1 || c->hash_n > MAX_HASH_N || c->hash_signed > 1) return corrupt(r, "hash parameters out of range");
        break;
    case FT_ENC_TARGET:
        if ((rc = get_f64(r, "target prior", &c->prior)) != MR_OK) return rc;
        if (!isfinite(c->prior)) return corrupt(r, "target prior is not finite");
        if ((rc = read_vocab(r, c, 1)) != MR_OK) return rc;
        break;
    default:
        break;
    }
    return MR_OK;
}

mr_status mr_features_load(const void *data, size_t len, mr_features **out, mr_error *err)
{
    mr_status rc = MR_OK;
    rd r = {.p = data, .len = len, .err = err};
    mr_features *f = NULL;
    *out = NULL;
    if (len < HEADER_LEN + TRAILER_LEN) return corrupt(&r, "file too short for the header");
    if (memcmp(data, MR_FEATURES_MAGIC, 4) != 0) return corrupt(&r, "bad magic (not a millrace features file)");
    r.off = 4;
    uint32_t version;
    uint64_t body_len, sum, want;
    get_u32(&r, "version", &version);
    if (version != MR_FEATURES_VERSION)
        return MR_ERR(err, MR_E_CORRUPT, "features artifact: unsupported version %u (this build reads %u)", version,
                      MR_FEATURES_VERSION);
    get_u64(&r, "body length", &body_len);
    if (body_len != len - HEADER_LEN - TRAILER_LEN) return corrupt(&r, "body length does not match the file size (truncated?)");
    r.off = len - TRAILER_LEN;
    get_u64(&r, "checksum", &sum);
    want = mr__ml_hash64(data, len - TRAILER_LEN, 0);
    if (sum != want) return corrupt(&r, "checksum mismatch");
    r.off = HEADER_LEN;
    r.len = len - TRAILER_LEN;
    if (!(f = mr_calloc(1, sizeof(*f)))) return MR_ERR(err, MR_E_NOMEM, "features artifact: out of memory");
    uint32_t n_cols;
    if ((rc = get_count(&r, "input count", 12, &n_cols)) != MR_OK) goto fail;
    if (n_cols && !(f->cols = mr_calloc(n_cols, sizeof(ft_col)))) goto oom;
    for (uint32_t k = 0; k < n_cols; k++) {
        r.col = k;
        r.in_col = 1;
        f->n_cols++;
        if ((rc = read_col(&r, &f->cols[k])) != MR_OK) goto fail;
        for (uint32_t j = 0; j < k; j++)
            if (strcmp(f->cols[j].name, f->cols[k].name) == 0) {
                rc = corrupt(&r, "input name appears twice");
                goto fail;
            }
    }
    r.in_col = 0;
    mr_error tmp;
    mr_error_init(&tmp);
    if ((rc = mr__ft_finish(f, &tmp)) != MR_OK) {
        rc = rc == MR_E_NOMEM ? MR_ERR(err, rc, "features artifact: out of memory")
                              : MR_ERR(err, MR_E_CORRUPT, "features artifact: %s", tmp.msg);
        goto fail;
    }
    uint32_t n_out;
    if ((rc = get_count(&r, "output count", 13, &n_out)) != MR_OK) goto fail;
    if (n_out != f->n_out) {
        rc = corrupt(&r, "output count does not match the inputs");
        goto fail;
    }
    for (uint32_t j = 0; j < n_out; j++) {
        const mr_features_output *o = &f->outs[j];
        char *name = NULL;
        uint32_t input, n_cat;
        uint8_t cat;
        if ((rc = get_str(&r, "output name", &name, NULL)) != MR_OK) goto fail;
        int same = strcmp(name, o->name) == 0;
        mr_free(name);
        if ((rc = get_u32(&r, "output input index", &input)) != MR_OK) goto fail;
        if ((rc = get_u8(&r, "output categorical flag", &cat)) != MR_OK) goto fail;
        if ((rc = get_u32(&r, "output category count", &n_cat)) != MR_OK) goto fail;
        if (!same || input != o->input || cat != o->categorical || n_cat != o->n_categories) {
            rc = corrupt(&r, "output list does not match the inputs");
            goto fail;
        }
    }
    if (r.off != r.len) {
        rc = corrupt(&r, "trailing bytes after the output list");
        goto fail;
    }
    *out = f;
    return MR_OK;
oom:
    rc = MR_ERR(err, MR_E_NOMEM, "features artifact: out of memory");
fail:
    mr_features_free(f);
    return rc;
}
