/* Shared machinery of the text readers (see read_int.h): the strtod slow
 * path, type classification, chunk-local column builders, their
 * concatenation (with dictionary encoding) and the thread-capped runner. */
#include "data/read_int.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <xxhash.h>

/* ---- values ------------------------------------------------------------- */

static int ieq(const char *s, size_t len, const char *w)
{
    size_t n = strlen(w);
    if (len != n) return 0;
    for (size_t i = 0; i < n; i++)
        if ((s[i] | 0x20) != w[i]) return 0;
    return 1;
}

int mr__parse_f64_slow(const char *s, size_t len, double *out)
{
    size_t i = 0;
    if (len && (s[0] == '-' || s[0] == '+')) i = 1;
    if (ieq(s + i, len - i, "nan") || ieq(s + i, len - i, "inf") || ieq(s + i, len - i, "infinity")) goto ok;
    size_t nd = 0;
    while (i < len && s[i] >= '0' && s[i] <= '9') i++, nd++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9') i++, nd++;
    }
    if (!nd) return -1;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '-' || s[i] == '+')) i++;
        size_t ne = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9') i++, ne++;
        if (!ne) return -1;
    }
    if (i != len) return -1;
ok:;
    /* strtod needs a NUL-terminated copy; long numbers take a cold heap copy. */
    char stack[128];
    char *tmp = len < sizeof(stack) ? stack : mr_malloc(len + 1);
    if (!tmp) return -1;
    memcpy(tmp, s, len);
    tmp[len] = '\0';
    *out = strtod(tmp, NULL);
    if (tmp != stack) mr_free(tmp);
    return 0;
}

mr_dtype mr__classify(const char *s, size_t len)
{
    int64_t i;
    double d;
    int b;
    int32_t day;
    if (!mr__parse_i64(s, len, &i)) return MR_T_INT64;
    if (!mr__parse_f64(s, len, &d)) return MR_T_FLOAT64;
    if (!mr__parse_bool(s, len, &b)) return MR_T_BOOL;
    if (len == 10 && !mr_date_parse(s, len, &day)) return MR_T_DATE;
    if (len >= 19 && !mr_timestamp_parse(s, len, &i)) return MR_T_TIMESTAMP;
    return MR_T_STRING;
}

mr_dtype mr__type_join(mr_dtype a, mr_dtype b)
{
    if (a == b || b == MR_T_NULL) return a;
    if (a == MR_T_NULL) return b;
    if ((a == MR_T_INT64 && b == MR_T_FLOAT64) || (a == MR_T_FLOAT64 && b == MR_T_INT64)) return MR_T_FLOAT64;
    if ((a == MR_T_DATE && b == MR_T_TIMESTAMP) || (a == MR_T_TIMESTAMP && b == MR_T_DATE)) return MR_T_TIMESTAMP;
    return MR_T_STRING;
}

void mr__quote_value(const char *s, size_t len, char *buf, size_t buf_len)
{
    int cut = len > 40;
    snprintf(buf, buf_len, "\"%.*s%s\"", (int)(cut ? 40 : len), s, cut ? "..." : "");
}

/* ---- builders ----------------------------------------------------------- */

mr_status mr__cb_init(mr__cb *b, mr_dtype type, size_t cap)
{
    memset(b, 0, sizeof(*b));
    b->type = type;
    b->cap = cap;
    b->valid = mr_malloc(cap ? cap : 1);
    if (type == MR_T_STRING) {
        b->offsets = mr_malloc((cap + 1) * sizeof(int64_t));
        if (b->offsets) b->offsets[0] = 0;
    } else {
        size_t w = mr_dtype_width(type) ? mr_dtype_width(type) : 1;
        b->data = cap > SIZE_MAX / w ? NULL : mr_malloc(cap * w);
    }
    if (!b->valid || (type == MR_T_STRING ? !b->offsets : !b->data)) {
        mr__cb_free(b);
        return MR_E_NOMEM;
    }
    return MR_OK;
}

void mr__cb_free(mr__cb *b)
{
    if (!b) return;
    mr_free(b->valid);
    mr_free(b->data);
    mr_free(b->offsets);
    mr_free(b->bytes);
    memset(b, 0, sizeof(*b));
}

mr_status mr__cb_grow_bytes(mr__cb *b, size_t extra)
{
    if (extra > ((size_t)1 << 40) - b->bytes_len) return MR_E_LIMIT;
    size_t need = b->bytes_len + extra, ncap = b->bytes_cap ? b->bytes_cap : 256; /* small: one per string column and chunk */
    while (ncap < need) ncap *= 2;
    char *nb = mr_realloc(b->bytes, ncap);
    if (!nb) return MR_E_NOMEM;
    b->bytes = nb;
    b->bytes_cap = ncap;
    return MR_OK;
}

/* ---- concatenation ------------------------------------------------------ */

static mr_status set_validity(mr_column *c, const mr__cb *parts, size_t stride, size_t n_parts, size_t n_null)
{
    c->null_count = n_null;
    if (!n_null) return MR_OK;
    size_t nb = (c->cap + 7) / 8;
    c->valid = mr_malloc(nb ? nb : 1);
    if (!c->valid) return MR_E_NOMEM;
    memset(c->valid, 0xff, nb ? nb : 1);
    size_t row = 0;
    for (size_t k = 0; k < n_parts; k++) {
        const mr__cb *p = &parts[k * stride];
        for (size_t i = 0; i < p->n; i++, row++)
            if (!p->valid[i]) c->valid[row >> 3] &= (uint8_t) ~(1u << (row & 7));
    }
    return MR_OK;
}

/* Tries dictionary encoding; *done = 0 when there are too many distinct values. */
static mr_status try_dict(const char *name, const mr__cb *parts, size_t stride, size_t n_parts, size_t n_rows,
                          size_t n_null, mr_column **out, int *done)
{
    *done = 0;
    size_t limit = n_rows / 2 < MR__DICT_MAX ? n_rows / 2 : MR__DICT_MAX;
    if (limit == 0) return MR_OK;
    size_t n_slots = 16;
    while (n_slots < limit * 2) n_slots *= 2;
    mr_status rc = MR_OK;
    int32_t *slots = mr_malloc(n_slots * sizeof(int32_t));
    uint64_t *hashes = mr_malloc((limit + 1) * sizeof(uint64_t));
    mr_column *dict = NULL, *c = NULL;
    if (!slots || !hashes || mr_column_new("", MR_T_STRING, 0, &dict, NULL) != MR_OK ||
        mr_column_new_dict(name, dict, 0, &c, NULL) != MR_OK) {
        dict = NULL; /* owned by c, or freed by mr_column_new_dict on failure */
        rc = MR_E_NOMEM;
        goto done;
    }
    dict = c->dict;
    memset(slots, 0xff, n_slots * sizeof(int32_t));
    mr_free(c->codes);
    c->codes = mr_malloc((n_rows ? n_rows : 1) * sizeof(int32_t));
    if (!c->codes) {
        rc = MR_E_NOMEM;
        goto done;
    }
    c->cap = n_rows;
    size_t row = 0;
    for (size_t k = 0; k < n_parts; k++) {
        const mr__cb *p = &parts[k * stride];
        for (size_t i = 0; i < p->n; i++, row++) {
            if (!p->valid[i]) {
                c->codes[row] = 0;
                continue;
            }
            const char *s = p->bytes + p->offsets[i];
            size_t len = (size_t)(p->offsets[i + 1] - p->offsets[i]);
            uint64_t h = XXH3_64bits(s, len);
            size_t slot = (size_t)h & (n_slots - 1);
            int32_t code;
            for (;;) {
                code = slots[slot];
                if (code < 0) break;
                size_t dl;
                const char *ds = mr_column_str(dict, (size_t)code, &dl);
                if (hashes[code] == h && dl == len && !memcmp(ds, s, len)) break;
                slot = (slot + 1) & (n_slots - 1);
            }
            if (code < 0) {
                if (dict->n >= limit) goto done; /* too many distinct values: plain */
                code = (int32_t)dict->n;
                hashes[code] = h;
                slots[slot] = code;
                rc = mr_column_append_str(dict, s, len);
                if (rc != MR_OK) goto done;
            }
            c->codes[row] = code;
        }
    }
    if (dict->n == 0) {
        /* all null: codes must still index a dictionary entry */
        rc = mr_column_append_str(dict, "", 0);
        if (rc != MR_OK) goto done;
    }
    c->n = n_rows;
    rc = set_validity(c, parts, stride, n_parts, n_null);
    if (rc != MR_OK) goto done;
    *out = c;
    c = NULL;
    *done = 1;
done:
    mr_column_free(c);
    mr_free(slots);
    mr_free(hashes);
    return rc;
}

mr_status mr__cb_concat(const char *name, mr_dtype type, const mr_colkind *kind, mr__cb *parts, size_t stride,
                        size_t n_parts, mr_column **out, mr_error *err)
{
    /* the kind first: the parts are consumed below */
    mr_colkind ck = n_parts ? parts[0].kind : kind ? *kind : (mr_colkind){0}; /* declared: every part has it */
    if (type == MR_T_TIMESTAMP && !(ck.flags & MR_KIND_LOCAL)) {
        /* naive unless some value had an offset (then all are UTC); declared timestamp_local stays naive */
        ck.flags |= MR_KIND_LOCAL;
        for (size_t k = 0; k < n_parts; k++)
            if (parts[k * stride].ts_offset) ck.flags &= (uint8_t)~MR_KIND_LOCAL;
    }
    size_t n_rows = 0, n_null = 0, n_bytes = 0;
    for (size_t k = 0; k < n_parts; k++) {
        const mr__cb *p = &parts[k * stride];
        n_rows += p->n;
        for (size_t i = 0; i < p->n; i++) n_null += !p->valid[i];
        if (type == MR_T_STRING) n_bytes += (size_t)p->offsets[p->n];
    }
    mr_column *c = NULL;
    mr_status rc = MR_OK;
    if (type == MR_T_NULL) {
        rc = mr_column_new(name, MR_T_STRING, n_rows, &c, err);
        for (size_t i = 0; rc == MR_OK && i < n_rows; i++) rc = mr_column_append_null(c);
        goto done;
    }
    if (type == MR_T_STRING) {
        int done = 0;
        rc = try_dict(name, parts, stride, n_parts, n_rows, n_null, &c, &done);
        if (rc != MR_OK || done) goto done;
    }
    rc = mr_column_new(name, type, 0, &c, err);
    if (rc != MR_OK) goto done;
    c->cap = n_rows;
    c->n = n_rows;
    rc = set_validity(c, parts, stride, n_parts, n_null); /* before the parts are consumed */
    if (rc != MR_OK) goto done;
    if (type == MR_T_STRING) {
        mr_free(c->offsets);
        c->offsets = mr_malloc((n_rows + 1) * sizeof(int64_t));
        c->bytes = mr_malloc(n_bytes ? n_bytes : 1);
        if (!c->offsets || !c->bytes) {
            rc = MR_E_NOMEM;
            goto done;
        }
        c->bytes_cap = n_bytes ? n_bytes : 1;
        c->offsets[0] = 0;
        size_t row = 0;
        int64_t base = 0;
        for (size_t k = 0; k < n_parts; k++) {
            mr__cb *p = &parts[k * stride];
            if (p->offsets[p->n]) memcpy(c->bytes + base, p->bytes, (size_t)p->offsets[p->n]);
            for (size_t i = 0; i < p->n; i++) c->offsets[++row] = base + p->offsets[i + 1];
            base += p->offsets[p->n];
            mr__cb_free(p); /* copied: the peak stays near one copy of the column */
        }
        c->bytes_len = n_bytes;
    } else {
        /* The first part's buffer grows into the column (realloc: no copy of it when it can grow in
         * place, as large blocks do with mremap) and each later part is freed once copied, so the
         * column and its parts never coexist whole. */
        size_t w = mr_dtype_width(type), row = 0;
        void *first = n_parts ? parts[0].data : NULL;
        c->data = mr_realloc(first, n_rows ? n_rows * w : 1);
        if (!c->data) {
            rc = MR_E_NOMEM;
            goto done;
        }
        if (n_parts) {
            parts[0].data = NULL; /* now the column's */
            row = parts[0].n;
            mr__cb_free(&parts[0]);
        }
        for (size_t k = 1; k < n_parts; k++) {
            mr__cb *p = &parts[k * stride];
            if (p->n) memcpy((char *)c->data + row * w, p->data, p->n * w);
            row += p->n;
            mr__cb_free(p);
        }
    }
done:
    if (rc != MR_OK) {
        mr_column_free(c);
        return MR_ERR(err, rc, "out of memory building column '%s'", name);
    }
    if (type != MR_T_NULL) c->kind = ck;
    *out = c;
    return MR_OK;
}

typedef struct table_job {
    char *const *names;
    const mr_dtype *types;
    const mr_colkind *kinds;
    size_t n_cols, n_chunks;
    mr__cb *cbs;
    mr_column **cols;
    mr_status *rcs;
    mr_error **errs; /* per column, only for a column that failed (an mr_error is 2 KB) */
} table_job;

static void table_task(void *ctx, size_t j)
{
    table_job *t = ctx;
    mr_error e;
    mr_error_init(&e);
    t->rcs[j] = mr__cb_concat(t->names[j], t->types[j], t->kinds ? &t->kinds[j] : NULL, t->cbs ? t->cbs + j : NULL,
                              t->n_cols, t->n_chunks, &t->cols[j], &e);
    if (t->rcs[j] != MR_OK) {
        t->errs[j] = mr_malloc(sizeof(e));
        if (t->errs[j]) *t->errs[j] = e;
    }
}

mr_status mr__cb_table(char *const *names, const mr_dtype *types, const mr_colkind *kinds, size_t n_cols,
                       mr__cb *cbs, size_t n_chunks, int threads, mr_table **out, mr_error *err)
{
    mr_table *t = NULL;
    table_job job = {names, types, kinds, n_cols, n_chunks, cbs, NULL, NULL, NULL};
    mr_status rc = mr_table_new(&t, err);
    if (rc != MR_OK) return rc;
    job.cols = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_column *));
    job.rcs = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_status));
    job.errs = mr_calloc(n_cols ? n_cols : 1, sizeof(mr_error *));
    if (!job.cols || !job.rcs || !job.errs) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory building table");
        goto done;
    }
    mr__run_tasks(n_cols, threads, table_task, &job);
    for (size_t j = 0; j < n_cols; j++) { /* the first failing column's error, at any thread count */
        if (job.rcs[j] != MR_OK) {
            rc = job.rcs[j];
            if (err && !mr_error_is_set(err)) {
                if (job.errs[j]) *err = *job.errs[j];
                else MR_ERR(err, rc, "out of memory building column '%s'", names[j]);
            }
            goto done;
        }
    }
    for (size_t j = 0; j < n_cols; j++) {
        rc = mr_table_add_column(t, job.cols[j], err);
        job.cols[j] = NULL;
        if (rc != MR_OK) goto done;
    }
done:
    if (job.cols)
        for (size_t j = 0; j < n_cols; j++) mr_column_free(job.cols[j]);
    if (job.errs)
        for (size_t j = 0; j < n_cols; j++) mr_free(job.errs[j]);
    mr_free(job.cols);
    mr_free(job.rcs);
    mr_free(job.errs);
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

/* ---- tasks -------------------------------------------------------------- */

typedef struct task_pool {
    mr__task_fn fn;
    void *ctx;
    size_t n;
    atomic_size_t next;
} task_pool;

static void task_worker(void *ctx, size_t begin, size_t end, int tid)
{
    (void)begin, (void)end, (void)tid;
    task_pool *tp = ctx;
    for (;;) {
        size_t i = atomic_fetch_add(&tp->next, 1);
        if (i >= tp->n) break;
        tp->fn(tp->ctx, i);
    }
}

void mr__run_tasks(size_t n, int threads, mr__task_fn fn, void *ctx)
{
    int pool_n = mr_pool_threads();
    if (threads <= 0 || threads > pool_n) threads = pool_n;
    if (threads <= 1 || n <= 1) {
        for (size_t i = 0; i < n; i++) fn(ctx, i);
        return;
    }
    task_pool tp = {fn, ctx, n, 0};
    atomic_init(&tp.next, 0);
    size_t workers = (size_t)threads < n ? (size_t)threads : n;
    mr_parallel_for(workers, 1, task_worker, &tp);
}
