/* Loader options from a value tree: one parser for a `loaders:` entry of
 * millrace.yaml (checked when the spec loads, with the line and column of a
 * bad key) and for the keywords of the Python package's Loader (passed as
 * JSON), so the two accept the same keys with the same meaning
 * (docs/data.md, Loader options). */
#include "millrace/loader.h"
#include "millrace/value.h"

#include <math.h>
#include <string.h>

static const char *const known_keys[] = {
    "dataset", "batch_size", "columns", "filter", "shuffle", "seed", "epoch", "start_batch", "threads",
    "prefetch", "drop_last", "shuffle_buffer", "rank", "world_size", "shapes", "decode", "resize",
    "center_crop", "random_resized_crop", "hflip", "normalize", "output", "on_error",
};
#define N_KNOWN (sizeof(known_keys) / sizeof(known_keys[0]))

static mr_status bad(mr_error *err, const mr_value *at, const char *key, const char *expected)
{
    return mr_error_set_at(err, NULL, at->line, at->col, MR_E_SCHEMA, "loader option '%s': expected %s, got %s", key,
                           expected, mr_vkind_name(at->kind));
}

/* An optional integer >= lo at key; *out is left alone when absent or null. */
static mr_status get_uint(const mr_value *m, const char *key, int64_t lo, uint64_t *out, mr_error *err)
{
    const mr_value *v = mr_value_get(m, key);
    if (!v || v->kind == MR_V_NULL) return MR_OK;
    if (v->kind != MR_V_INT || v->u.i < lo) {
        char what[48];
        snprintf(what, sizeof what, "an integer >= %lld", (long long)lo);
        if (v->kind == MR_V_INT)
            return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "loader option '%s': expected %s, got %lld",
                                   key, what, (long long)v->u.i);
        return bad(err, v, key, what);
    }
    *out = (uint64_t)v->u.i;
    return MR_OK;
}

static mr_status get_int(const mr_value *m, const char *key, int64_t lo, int64_t hi, int *out, mr_error *err)
{
    uint64_t x = (uint64_t)*out;
    mr_status rc = get_uint(m, key, lo, &x, err);
    if (rc == MR_OK && (int64_t)x > hi) {
        const mr_value *v = mr_value_get(m, key);
        return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "loader option '%s': %lld is above %lld", key,
                               (long long)x, (long long)hi);
    }
    *out = (int)x;
    return rc;
}

static mr_status get_bool(const mr_value *m, const char *key, int *out, mr_error *err)
{
    const mr_value *v = mr_value_get(m, key);
    if (!v || v->kind == MR_V_NULL) return MR_OK;
    if (v->kind != MR_V_BOOL) return bad(err, v, key, "true or false");
    *out = v->u.b;
    return MR_OK;
}

static int number(const mr_value *v, double *out)
{
    if (v->kind == MR_V_INT) *out = (double)v->u.i;
    else if (v->kind == MR_V_FLOAT) *out = v->u.f;
    else return 0;
    return isfinite(*out);
}

/* n numbers at v (a sequence), named key in errors. */
static mr_status numbers(const mr_value *v, const char *key, double *out, size_t n, mr_error *err)
{
    char what[48];
    snprintf(what, sizeof what, "a list of %zu numbers", n);
    if (v->kind != MR_V_SEQ || v->n != n) return bad(err, v, key, what);
    for (size_t i = 0; i < n; i++)
        if (!number(v->items[i], &out[i])) return bad(err, v->items[i], key, what);
    return MR_OK;
}

/* A size: one positive integer (square) or [height, width]. */
static mr_status size_of(const mr_value *v, const char *key, int *h, int *w, mr_error *err)
{
    static const char what[] = "a size: an integer or [height, width]";
    if (v->kind == MR_V_INT && v->u.i > 0 && v->u.i <= 65535) {
        *h = *w = (int)v->u.i;
        return MR_OK;
    }
    if (v->kind != MR_V_SEQ || v->n != 2) return bad(err, v, key, what);
    for (size_t i = 0; i < 2; i++)
        if (v->items[i]->kind != MR_V_INT || v->items[i]->u.i <= 0 || v->items[i]->u.i > 65535)
            return bad(err, v->items[i], key, "a size of positive integers up to 65535");
    *h = (int)v->items[0]->u.i;
    *w = (int)v->items[1]->u.i;
    return MR_OK;
}

/* One of the words of list (n of them) at key; *out its index. */
static mr_status word(const mr_value *m, const char *key, const char *const *list, size_t n, int *out,
                      mr_error *err)
{
    const mr_value *v = mr_value_get(m, key);
    if (!v || v->kind == MR_V_NULL) return MR_OK;
    for (size_t i = 0; v->kind == MR_V_STR && i < n; i++)
        if (!strcmp(v->str, list[i])) {
            *out = (int)i;
            return MR_OK;
        }
    char what[96] = "one of";
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(what);
        snprintf(what + l, sizeof what - l, "%s %s", i ? (i + 1 == n ? " or" : ",") : "", list[i]);
    }
    if (v->kind == MR_V_STR)
        return mr_error_set_at(err, NULL, v->line, v->col, MR_E_SCHEMA, "loader option '%s': expected %s, got \"%s\"", key,
                               what, v->str);
    return bad(err, v, key, what);
}

/* Every key of mapping m is one of the n in keys (what names the mapping in the error). */
static mr_status known(const mr_value *m, const char *what, const char *const *keys, size_t n, mr_error *err)
{
    for (size_t i = 0; i < m->n; i++) {
        size_t k = 0;
        while (k < n && strcmp(m->keys[i], keys[k])) k++;
        if (k < n) continue;
        mr_status rc = mr_error_set_at(err, NULL, m->key_lines ? m->key_lines[i] : 0, m->key_cols ? m->key_cols[i] : 0,
                                       MR_E_SCHEMA, "unknown %s '%s'", what, m->keys[i]);
        const char *near = mr_closest(m->keys[i], keys, n);
        if (near) mr_error_hint(err, "did you mean '%s'?", near);
        else {
            char list[512] = "";
            for (size_t j = 0; j < n; j++) {
                size_t l = strlen(list);
                snprintf(list + l, sizeof list - l, "%s%s", j ? ", " : "", keys[j]);
            }
            mr_error_hint(err, "the keys: %s", list);
        }
        return rc;
    }
    return MR_OK;
}

static const char *const numpy_types[] = {"bool",   "int8",   "uint8",   "int16",   "uint16",  "int32",
                                          "uint32", "int64",  "uint64",  "float16", "float32", "float64"};

/* shapes: {column: [[dims...], dtype]}: binary columns of raw fixed-size tensors (the Python
 * package turns them into arrays; checked here so a spec fails when it loads). */
static mr_status check_shapes(const mr_value *v, mr_error *err)
{
    static const char what[] = "a mapping of columns to [[dimensions...], dtype]";
    if (v->kind != MR_V_MAP) return bad(err, v, "shapes", what);
    for (size_t i = 0; i < v->n; i++) {
        const mr_value *e = v->items[i];
        if (e->kind != MR_V_SEQ || e->n != 2 || e->items[0]->kind != MR_V_SEQ || e->items[1]->kind != MR_V_STR)
            return bad(err, e, "shapes", what);
        for (size_t d = 0; d < e->items[0]->n; d++) {
            const mr_value *x = e->items[0]->items[d];
            if (x->kind != MR_V_INT || x->u.i <= 0) return bad(err, x, "shapes", "positive dimensions");
        }
        size_t t = 0;
        while (t < sizeof numpy_types / sizeof *numpy_types && strcmp(e->items[1]->str, numpy_types[t])) t++;
        if (t == sizeof numpy_types / sizeof *numpy_types)
            return mr_error_set_at(err, NULL, e->items[1]->line, e->items[1]->col, MR_E_SCHEMA,
                                   "loader option 'shapes': column '%s': unknown dtype \"%s\" (expected a numpy "
                                   "type such as uint8, int64 or float32)",
                                   v->keys[i], e->items[1]->str);
    }
    return MR_OK;
}

/* decode, the geometry, flip, output and normalize: the image options, or none. */
static mr_status image_part(const mr_value *m, mr_loader_spec *s, mr_error *err)
{
    mr_loader_opts *o = &s->opts;
    mr_image_opts *im = &o->image;
    const mr_value *dec = mr_value_get(m, "decode"), *rs = mr_value_get(m, "resize"),
                   *cc = mr_value_get(m, "center_crop"), *rrc = mr_value_get(m, "random_resized_crop"),
                   *hf = mr_value_get(m, "hflip"), *nz = mr_value_get(m, "normalize"), *at = NULL;
    if (dec && dec->kind == MR_V_NULL) dec = NULL;
    if (rs && rs->kind == MR_V_NULL) rs = NULL;
    if (cc && cc->kind == MR_V_NULL) cc = NULL;
    if (rrc && rrc->kind == MR_V_NULL) rrc = NULL;
    if (hf && hf->kind == MR_V_NULL) hf = NULL;
    if (nz && nz->kind == MR_V_NULL) nz = NULL;
    double flip = 0;
    if (hf && !number(hf, &flip)) return bad(err, hf, "hflip", "a probability in [0, 1]");
    if (!dec) {
        const mr_value *out = mr_value_get(m, "output"), *oe = mr_value_get(m, "on_error");
        at = rs ? rs : cc ? cc : rrc ? rrc : nz ? nz : flip != 0 ? hf : out ? out : oe;
        if (at && at->kind != MR_V_NULL)
            return mr_error_set_at(err, NULL, at->line, at->col, MR_E_SCHEMA,
                                   "loader options: resize, crops, hflip, normalize, output and on_error need "
                                   "decode: {column: ...}");
        return MR_OK;
    }
    mr_image_opts_init(im);
    o->decode_column = "image";
    if (dec->kind == MR_V_STR) {
        o->decode_column = dec->str;
    } else if (dec->kind == MR_V_MAP) {
        static const char *const dkeys[] = {"column", "format", "dct_scale"};
        mr_status rc = known(dec, "decode option", dkeys, 3, err);
        const mr_value *c = mr_value_get(dec, "column");
        if (rc == MR_OK && c && c->kind != MR_V_STR) rc = bad(err, c, "decode.column", "a column name");
        if (c && rc == MR_OK) o->decode_column = c->str;
        static const char *const fmts[] = {"auto", "jpeg", "png"};
        int f = 0;
        if (rc == MR_OK) rc = word(dec, "format", fmts, 3, &f, err);
        im->format = (mr_img_format)f;
        if (rc == MR_OK) rc = get_bool(dec, "dct_scale", &im->dct_scale, err);
        if (rc != MR_OK) return rc;
    } else {
        return bad(err, dec, "decode", "a column name or {column, format}");
    }
    if (!*o->decode_column) return mr_error_set_at(err, NULL, dec->line, dec->col, MR_E_SCHEMA, "loader option 'decode': an empty column name");
    mr_status rc = MR_OK;
    if (rrc) {
        if (rs || cc) {
            at = rs ? rs : cc;
            return mr_error_set_at(err, NULL, at->line, at->col, MR_E_SCHEMA,
                                   "loader options: random_resized_crop sets the output size: no resize or "
                                   "center_crop with it");
        }
        im->geometry = MR_IMG_RANDOM_RESIZED_CROP;
        if (rrc->kind == MR_V_MAP) {
            static const char *const rkeys[] = {"size", "scale", "ratio"};
            const mr_value *sz = mr_value_get(rrc, "size"), *sc = mr_value_get(rrc, "scale"),
                           *ra = mr_value_get(rrc, "ratio");
            rc = known(rrc, "random_resized_crop option", rkeys, 3, err);
            if (rc == MR_OK && !sz)
                rc = mr_error_set_at(err, NULL, rrc->line, rrc->col, MR_E_SCHEMA,
                                     "loader option 'random_resized_crop': no size");
            if (rc == MR_OK) rc = size_of(sz, "random_resized_crop.size", &im->out_h, &im->out_w, err);
            if (rc == MR_OK && sc) rc = numbers(sc, "random_resized_crop.scale", im->scale, 2, err);
            if (rc == MR_OK && ra) rc = numbers(ra, "random_resized_crop.ratio", im->ratio, 2, err);
        } else {
            rc = size_of(rrc, "random_resized_crop", &im->out_h, &im->out_w, err);
        }
    } else if (cc) {
        im->geometry = MR_IMG_CENTER_CROP;
        rc = size_of(cc, "center_crop", &im->out_h, &im->out_w, err);
        if (rc == MR_OK && rs) {
            if (rs->kind != MR_V_INT || rs->u.i <= 0 || rs->u.i > 65535)
                return bad(err, rs, "resize", "the shorter side's length (a positive integer) with center_crop");
            im->resize_shorter = (int)rs->u.i;
        }
    } else if (rs) {
        im->geometry = MR_IMG_RESIZE;
        rc = size_of(rs, "resize", &im->out_h, &im->out_w, err);
    } else {
        return mr_error_set_at(err, NULL, dec->line, dec->col, MR_E_SCHEMA,
                               "loader option 'decode': needs one output size: resize, center_crop or "
                               "random_resized_crop");
    }
    im->hflip = flip;
    static const char *const outs[] = {"uint8", "float32"}, *const onerr[] = {"fail", "skip"};
    if (rc == MR_OK) rc = word(m, "output", outs, 2, &im->to_float, err);
    if (rc == MR_OK) rc = word(m, "on_error", onerr, 2, &o->decode_skip_errors, err);
    if (rc == MR_OK && nz) {
        if (!im->to_float)
            return mr_error_set_at(err, NULL, nz->line, nz->col, MR_E_SCHEMA,
                                   "loader option 'normalize' goes with output: float32");
        static const char *const nkeys[] = {"mean", "std"};
        double mean[3], sd[3];
        const mr_value *mv = mr_value_get(nz, "mean"), *sv = mr_value_get(nz, "std");
        if (nz->kind != MR_V_MAP || !mv || !sv) return bad(err, nz, "normalize", "{mean: [r, g, b], std: [r, g, b]}");
        rc = known(nz, "normalize option", nkeys, 2, err);
        if (rc == MR_OK) rc = numbers(mv, "normalize.mean", mean, 3, err);
        if (rc == MR_OK) rc = numbers(sv, "normalize.std", sd, 3, err);
        for (int c = 0; rc == MR_OK && c < 3; c++) {
            im->mean[c] = (float)mean[c];
            im->std[c] = (float)sd[c];
        }
    }
    mr_error e2;
    mr_error_init(&e2);
    if (rc == MR_OK && mr_image_opts_check(im, &e2) != MR_OK) /* a value of the spec: a schema error */
        rc = mr_error_set_at(err, NULL, m->line, m->col, MR_E_SCHEMA, "loader options: %s", e2.msg);
    return rc;
}

mr_status mr_loader_spec_parse(const mr_value *m, mr_loader_spec *s, mr_error *err)
{
    memset(s, 0, sizeof(*s));
    mr_loader_opts *o = &s->opts;
    mr_loader_opts_init(o);
    if (!m || m->kind != MR_V_MAP)
        return m ? bad(err, m, "loader", "a mapping of loader options") : MR_ERR(err, MR_E_INVALID_ARG, "no loader options");
    mr_status rc = known(m, "loader option", known_keys, N_KNOWN, err);
    const mr_value *ds = mr_value_get(m, "dataset"), *cols = mr_value_get(m, "columns"),
                   *flt = mr_value_get(m, "filter"), *sh = mr_value_get(m, "shapes");
    if (rc == MR_OK && ds && ds->kind != MR_V_NULL) {
        if (ds->kind != MR_V_STR || !*ds->str) rc = bad(err, ds, "dataset", "a dataset directory (a path or ${stages.X})");
        else s->dataset = ds->str;
    }
    uint64_t bs = 1024, pf = 0, sb = 0, th = 0;
    if (rc == MR_OK) rc = get_uint(m, "batch_size", 1, &bs, err);
    if (rc == MR_OK) rc = get_uint(m, "seed", 0, &o->seed, err);
    if (rc == MR_OK) rc = get_uint(m, "epoch", 0, &o->epoch, err);
    if (rc == MR_OK) rc = get_uint(m, "start_batch", 0, &o->start_batch, err);
    if (rc == MR_OK) rc = get_uint(m, "threads", 0, &th, err);
    if (rc == MR_OK) rc = get_uint(m, "prefetch", 0, &pf, err);
    if (rc == MR_OK) rc = get_uint(m, "shuffle_buffer", 0, &sb, err);
    if (rc == MR_OK) rc = get_int(m, "rank", 0, 1 << 20, &o->rank, err);
    if (rc == MR_OK) rc = get_int(m, "world_size", 1, 1 << 20, &o->world_size, err);
    if (rc == MR_OK) rc = get_bool(m, "shuffle", &o->shuffle, err);
    if (rc == MR_OK) rc = get_bool(m, "drop_last", &o->drop_last, err);
    if (rc == MR_OK && th > 1024) rc = bad(err, mr_value_get(m, "threads"), "threads", "at most 1024 threads");
    if (rc != MR_OK) return rc;
    o->batch_size = (size_t)bs;
    o->threads = (int)th;
    o->prefetch_batches = (size_t)pf;
    o->shuffle_buffer_rows = (size_t)sb;
    if (o->world_size > 1 && o->rank >= o->world_size)
        return mr_error_set_at(err, NULL, m->line, m->col, MR_E_SCHEMA,
                               "loader options: rank %d is not below world_size %d", o->rank, o->world_size);
    if (flt && flt->kind != MR_V_NULL) {
        if (flt->kind != MR_V_STR) return bad(err, flt, "filter", "an expression (a string)");
        o->filter = flt->str;
    }
    if (cols && cols->kind != MR_V_NULL) {
        if (cols->kind != MR_V_SEQ) return bad(err, cols, "columns", "a list of column names");
        s->columns = mr_calloc(cols->n ? cols->n : 1, sizeof(*s->columns));
        if (!s->columns) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        for (size_t i = 0; i < cols->n; i++) {
            if (cols->items[i]->kind != MR_V_STR) {
                rc = bad(err, cols->items[i], "columns", "a column name");
                mr_loader_spec_free(s);
                return rc;
            }
            s->columns[i] = cols->items[i]->str;
        }
        o->columns = s->columns;
        o->n_columns = cols->n;
    }
    if (sh && sh->kind != MR_V_NULL) rc = check_shapes(sh, err);
    if (rc == MR_OK) rc = image_part(m, s, err);
    if (rc != MR_OK) mr_loader_spec_free(s);
    return rc;
}

void mr_loader_spec_free(mr_loader_spec *s)
{
    if (!s) return;
    mr_free((void *)s->columns);
    s->columns = NULL;
    s->opts.columns = NULL;
    s->opts.n_columns = 0;
}
