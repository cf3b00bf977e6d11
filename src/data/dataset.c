/* Datasets on disk: the streaming writer (row routing to hive partitions,
 * row groups and shards, per-shard column statistics, content hashes,
 * manifest.json written atomically and last) and the reader side's manifest
 * parsing and validation. Scanning lives in dataset_scan.c, the any-source
 * helper in dataset_source.c. The format is specified in docs/data.md. */
#include "data/dataset_int.h"
#include "data/s3_int.h"
#include "data/parquet_int.h"
#include "millrace/core.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <string.h>
#include <sys/stat.h>

#define DEFAULT_ROWS_PER_SHARD 1000000u
#define DEFAULT_ROW_GROUP_ROWS 131072u
#define DEFAULT_ROW_GROUP_BYTES ((size_t)128 << 20)
#define DATASET_ZSTD_LEVEL 1        /* see open_shard */
#define MAX_STAT_STR 256            /* longer string bounds are left out of the manifest */
#define MAX_MANIFEST ((size_t)1 << 30)
#define NULL_PARTITION "__HIVE_DEFAULT_PARTITION__" /* Hive's (and DuckDB's) name for a null value */

/* ---- typed values <-> JSON ------------------------------------------------------
 * Numbers as JSON numbers (non-finite floats as "nan"/"inf"/"-inf"), bools as
 * true/false, strings as strings, dates as "YYYY-MM-DD" and timestamps as
 * "YYYY-MM-DD HH:MM:SS[.ffffff]" (UTC) while the year is 0000..9999, else as
 * the raw integer (days / microseconds since the epoch). */

typedef struct tval {
    int is_null;
    int64_t i; /* BOOL, INT64, DATE, TIMESTAMP */
    double f;  /* floats */
    char *s;   /* STRING (owned) */
    size_t len;
} tval;

static void tval_free(tval *v)
{
    mr_free(v->s);
    v->s = NULL;
}

static int format_date(int32_t days, char *buf, size_t n)
{
    int64_t y;
    unsigned m, d;
    mr_date_to_civil(days, &y, &m, &d);
    if (y < 0 || y > 9999) return -1;
    snprintf(buf, n, "%04lld-%02u-%02u", (long long)y, m, d);
    return 0;
}

static int format_ts(int64_t us, char *buf, size_t n)
{
    int64_t day_us = 86400LL * 1000000LL;
    int64_t days = us / day_us, rem = us % day_us;
    if (rem < 0) {
        rem += day_us;
        days--;
    }
    if (days < INT32_MIN || days > INT32_MAX) return -1;
    char d[16];
    if (format_date((int32_t)days, d, sizeof d)) return -1;
    int64_t secs = rem / 1000000, frac = rem % 1000000;
    if (frac)
        snprintf(buf, n, "%s %02lld:%02lld:%02lld.%06lld", d, (long long)(secs / 3600), (long long)(secs / 60 % 60),
                 (long long)(secs % 60), (long long)frac);
    else
        snprintf(buf, n, "%s %02lld:%02lld:%02lld", d, (long long)(secs / 3600), (long long)(secs / 60 % 60),
                 (long long)(secs % 60));
    return 0;
}

/* NULL when a string is not valid UTF-8 (or on OOM). */
static json_t *value_json(mr_dtype t, int64_t i, double f, const char *s, size_t len)
{
    char buf[64];
    switch (t) {
    case MR_T_BOOL: return json_boolean(i);
    case MR_T_INT64:
    case MR_T_DECIMAL: return json_integer((json_int_t)i); /* DECIMAL: the unscaled value */
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
        if (isnan(f)) return json_string("nan");
        if (isinf(f)) return json_string(f > 0 ? "inf" : "-inf");
        return json_real(f);
    case MR_T_DATE:
        if (i < INT32_MIN || i > INT32_MAX || format_date((int32_t)i, buf, sizeof buf)) return json_integer(i);
        return json_string(buf);
    case MR_T_TIMESTAMP:
        if (format_ts(i, buf, sizeof buf)) return json_integer(i);
        return json_string(buf);
    case MR_T_STRING: return json_stringn(s, len);
    default: return NULL;
    }
}

/* Parses a JSON value of type t into v (strings copied). 0 on success. */
static int json_value(const json_t *j, mr_dtype t, tval *v)
{
    memset(v, 0, sizeof *v);
    if (json_is_null(j)) {
        v->is_null = 1;
        return 0;
    }
    switch (t) {
    case MR_T_BOOL:
        if (!json_is_boolean(j)) return -1;
        v->i = json_is_true(j);
        return 0;
    case MR_T_INT64:
    case MR_T_DECIMAL:
        if (!json_is_integer(j)) return -1;
        v->i = json_integer_value(j);
        return 0;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
        if (json_is_number(j)) {
            v->f = json_number_value(j);
            return 0;
        }
        if (!json_is_string(j)) return -1;
        if (!strcmp(json_string_value(j), "nan")) v->f = NAN;
        else if (!strcmp(json_string_value(j), "inf")) v->f = INFINITY;
        else if (!strcmp(json_string_value(j), "-inf")) v->f = -INFINITY;
        else return -1;
        return 0;
    case MR_T_DATE: {
        if (json_is_integer(j)) {
            json_int_t d = json_integer_value(j);
            if (d < INT32_MIN || d > INT32_MAX) return -1;
            v->i = d;
            return 0;
        }
        int32_t d;
        if (!json_is_string(j) || mr_date_parse(json_string_value(j), json_string_length(j), &d)) return -1;
        v->i = d;
        return 0;
    }
    case MR_T_TIMESTAMP:
        if (json_is_integer(j)) {
            v->i = json_integer_value(j);
            return 0;
        }
        if (!json_is_string(j) || mr_timestamp_parse(json_string_value(j), json_string_length(j), &v->i)) return -1;
        return 0;
    case MR_T_STRING:
        if (!json_is_string(j)) return -1;
        v->len = json_string_length(j);
        v->s = mr_strndup(json_string_value(j), v->len);
        return v->s ? 0 : -2; /* out of memory, not a bad value */
    default: return -1;
    }
}

/* ---- per-column statistics accumulated while writing ---------------------------- */

typedef struct cstat {
    int has;                 /* a non-null, non-NaN value was seen */
    int str_too_long;        /* a string bound exceeded MAX_STAT_STR: min/max left out */
    int64_t mn_i, mx_i;
    double mn_f, mx_f;
    char *mn_s, *mx_s;       /* owned */
    size_t mn_len, mx_len;
    uint64_t nulls, nans;
} cstat;

static int str_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al < bl ? -1 : al > bl);
}

static int set_str(char **dst, size_t *dst_len, const char *s, size_t len)
{
    char *c = mr_malloc(len + 1);
    if (!c) return -1;
    memcpy(c, s, len);
    c[len] = 0;
    mr_free(*dst);
    *dst = c;
    *dst_len = len;
    return 0;
}

/* Accumulates rows [b, e) of c. */
static mr_status cstat_update(cstat *st, const mr_column *c, size_t b, size_t e)
{
    if (c->null_count && c->valid)
        for (size_t i = b; i < e; i++) st->nulls += mr_column_is_null(c, i);
    switch (c->type) {
    case MR_T_BOOL:
    case MR_T_INT64:
    case MR_T_DATE:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL:
        for (size_t i = b; i < e; i++) {
            if (mr_column_is_null(c, i)) continue;
            int64_t v = c->type == MR_T_BOOL ? ((const uint8_t *)c->data)[i]
                        : c->type == MR_T_DATE ? ((const int32_t *)c->data)[i]
                                               : ((const int64_t *)c->data)[i];
            if (!st->has || v < st->mn_i) st->mn_i = v;
            if (!st->has || v > st->mx_i) st->mx_i = v;
            st->has = 1;
        }
        break;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
        for (size_t i = b; i < e; i++) {
            if (mr_column_is_null(c, i)) continue;
            double v = c->type == MR_T_FLOAT64 ? ((const double *)c->data)[i] : ((const float *)c->data)[i];
            if (isnan(v)) {
                st->nans++;
                continue;
            }
            if (!st->has || v < st->mn_f) st->mn_f = v;
            if (!st->has || v > st->mx_f) st->mx_f = v;
            st->has = 1;
        }
        break;
    case MR_T_STRING: {
        const char *mn = NULL, *mx = NULL;
        size_t mnl = 0, mxl = 0;
        int have = 0;
        for (size_t i = b; i < e; i++) {
            if (mr_column_is_null(c, i)) continue;
            size_t l;
            const char *s = mr_column_str(c, i, &l);
            if (!have || str_cmp(s, l, mn, mnl) < 0) mn = s, mnl = l;
            if (!have || str_cmp(s, l, mx, mxl) > 0) mx = s, mxl = l;
            have = 1;
        }
        if (!have) break;
        if (!st->has || str_cmp(mn, mnl, st->mn_s, st->mn_len) < 0)
            if (set_str(&st->mn_s, &st->mn_len, mn, mnl)) return MR_E_NOMEM;
        if (!st->has || str_cmp(mx, mxl, st->mx_s, st->mx_len) > 0)
            if (set_str(&st->mx_s, &st->mx_len, mx, mxl)) return MR_E_NOMEM;
        st->has = 1;
        if (st->mn_len > MAX_STAT_STR || st->mx_len > MAX_STAT_STR) st->str_too_long = 1;
        break;
    }
    default: break;
    }
    return MR_OK;
}

static void cstat_free(cstat *st)
{
    mr_free(st->mn_s);
    mr_free(st->mx_s);
}

/* ---- writer ------------------------------------------------------------------------ */

typedef struct wshard {
    char *path;          /* relative */
    size_t part;
    uint64_t rows, row_groups, bytes;
    char hash[MR_HASH_HEX_LEN + 1];
    cstat *st;           /* n_cols (partition columns unused) */
} wshard;

typedef struct wpart {
    char *dir;           /* "k=v/k2=v2" or "" */
    tval vals[MR_DATASET_MAX_PARTITION_COLS];
    mr_table *acc;       /* rows not yet written (< one row group) */
    uint64_t acc_bytes;  /* their values' bytes (row_bytes) */
    mr_parquet_writer *pw;
    mr_hasher *hasher;   /* the open shard's content hash, fed as it is written */
    size_t shard;        /* index in w->shards while pw is open */
    uint64_t lru;
} wpart;

struct mr_dataset_writer {
    char *dir;
    size_t rows_per_shard, rg_rows, rg_bytes;
    mr_parquet_codec codec;
    int level;
    size_t n_pcols;
    char *pnames[MR_DATASET_MAX_PARTITION_COLS];
    size_t pidx[MR_DATASET_MAX_PARTITION_COLS]; /* schema indices */
    int have_schema;
    size_t n_cols;
    char **names;
    mr_dtype *types;
    mr_colkind *kinds; /* the first batch's kinds (schema order) */
    mr_colkind *fkinds; /* the same for the file columns (fcols order): every shard's */
    int *is_part;
    size_t n_fcols;
    size_t *fcols;       /* schema indices of the columns stored in the files */
    wpart *parts;
    size_t n_parts, cap_parts;
    size_t *slots;       /* open-addressing index over parts by dir: part + 1, 0 = empty */
    size_t n_slots;
    wshard *shards;
    size_t n_shards, cap_shards;
    size_t n_open;
    uint64_t tick;
    uint64_t rows;
    int failed;
};

void mr_dataset_write_opts_init(mr_dataset_write_opts *o)
{
    memset(o, 0, sizeof *o);
    o->rows_per_shard = DEFAULT_ROWS_PER_SHARD;
    o->row_group_rows = DEFAULT_ROW_GROUP_ROWS;
    o->row_group_bytes = DEFAULT_ROW_GROUP_BYTES;
    o->codec = MR_PQ_ZSTD;
}

mr_status mr_dataset_writer_open(const char *dir, const mr_dataset_write_opts *opts, mr_dataset_writer **out,
                                 mr_error *err)
{
    mr_dataset_write_opts def;
    if (!opts) {
        mr_dataset_write_opts_init(&def);
        opts = &def;
    }
    *out = NULL;
    if (opts->n_partition_by > MR_DATASET_MAX_PARTITION_COLS)
        return MR_ERR(err, MR_E_INVALID_ARG, "dataset: at most %d partition columns, got %zu",
                      MR_DATASET_MAX_PARTITION_COLS, opts->n_partition_by);
    mr_status rc = mr_fs_mkdirs(dir, err);
    if (rc != MR_OK) return rc;
    mr_dataset_writer *w = mr_calloc(1, sizeof *w);
    if (!w) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    w->dir = mr_strdup(dir);
    w->rows_per_shard = opts->rows_per_shard ? opts->rows_per_shard : DEFAULT_ROWS_PER_SHARD;
    w->rg_rows = opts->row_group_rows ? opts->row_group_rows : DEFAULT_ROW_GROUP_ROWS;
    w->rg_bytes = opts->row_group_bytes ? opts->row_group_bytes : DEFAULT_ROW_GROUP_BYTES;
    w->codec = opts->codec;
    w->level = opts->level;
    w->n_pcols = opts->n_partition_by;
    if (!w->dir) goto nomem;
    for (size_t k = 0; k < w->n_pcols; k++) {
        for (size_t q = 0; q < k; q++)
            if (!strcmp(opts->partition_by[q], opts->partition_by[k])) {
                mr_dataset_writer_free(w);
                return MR_ERR(err, MR_E_INVALID_ARG, "dataset: partition column '%s' listed twice",
                              opts->partition_by[k]);
            }
        w->pnames[k] = mr_strdup(opts->partition_by[k]);
        if (!w->pnames[k]) goto nomem;
    }
    *out = w;
    return MR_OK;
nomem:
    mr_dataset_writer_free(w);
    return MR_ERR(err, MR_E_NOMEM, "out of memory");
}

void mr_dataset_writer_free(mr_dataset_writer *w)
{
    if (!w) return;
    for (size_t i = 0; i < w->n_parts; i++) {
        wpart *p = &w->parts[i];
        mr_free(p->dir);
        for (size_t k = 0; k < w->n_pcols; k++) tval_free(&p->vals[k]);
        mr_table_free(p->acc);
        mr_parquet_writer_free(p->pw);
        mr_hasher_free(p->hasher);
    }
    for (size_t i = 0; i < w->n_shards; i++) {
        mr_free(w->shards[i].path);
        if (w->shards[i].st)
            for (size_t j = 0; j < w->n_cols; j++) cstat_free(&w->shards[i].st[j]);
        mr_free(w->shards[i].st);
    }
    for (size_t j = 0; w->names && j < w->n_cols; j++) mr_free(w->names[j]); /* NULL: its allocation failed */
    for (size_t k = 0; k < w->n_pcols; k++) mr_free(w->pnames[k]);
    mr_free(w->names);
    mr_free(w->types);
    mr_free(w->kinds);
    mr_free(w->fkinds);
    mr_free(w->is_part);
    mr_free(w->fcols);
    mr_free(w->parts);
    mr_free(w->slots);
    mr_free(w->shards);
    mr_free(w->dir);
    mr_free(w);
}

static mr_status fix_schema(mr_dataset_writer *w, const mr_table *t, mr_error *err)
{
    w->n_cols = t->n_cols;
    w->names = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *w->names);
    w->types = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *w->types);
    w->is_part = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *w->is_part);
    w->fcols = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *w->fcols);
    w->kinds = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *w->kinds);
    w->fkinds = mr_calloc(t->n_cols ? t->n_cols : 1, sizeof *w->fkinds);
    if (!w->names || !w->types || !w->is_part || !w->fcols || !w->kinds || !w->fkinds)
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t j = 0; j < t->n_cols; j++) {
        w->names[j] = mr_strdup(t->cols[j]->name);
        if (!w->names[j]) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        if (!mr_utf8_valid(w->names[j], strlen(w->names[j]))) { /* the manifest is JSON: checked before any shard */
            char shown[160];
            mr_term_escape(w->names[j], shown, sizeof shown);
            return MR_ERR(err, MR_E_SCHEMA, "dataset: the name of column %zu ('%s') is not valid UTF-8", j + 1, shown);
        }
        w->types[j] = t->cols[j]->type;
        w->kinds[j] = t->cols[j]->kind;
        if (w->types[j] == MR_T_NULL)
            return MR_ERR(err, MR_E_SCHEMA, "dataset: column '%s' has no type (all null?); declare one",
                          w->names[j]);
    }
    for (size_t k = 0; k < w->n_pcols; k++) {
        ssize_t j = mr_table_column_index(t, w->pnames[k]);
        if (j < 0) {
            MR_ERR(err, MR_E_NOT_FOUND, "dataset: partition column '%s' is not in the data", w->pnames[k]);
            mr_error_key(err, w->pnames[k]);
            return MR_E_NOT_FOUND;
        }
        w->pidx[k] = (size_t)j;
        w->is_part[j] = 1;
    }
    for (size_t j = 0; j < t->n_cols; j++)
        if (!w->is_part[j]) {
            w->fkinds[w->n_fcols] = w->kinds[j];
            w->fcols[w->n_fcols++] = j;
        }
    if (w->n_fcols == 0)
        return MR_ERR(err, MR_E_INVALID_ARG, "dataset: every column is a partition column; shards need at least one other");
    w->have_schema = 1;
    return MR_OK;
}

static mr_status check_schema(const mr_dataset_writer *w, const mr_table *t, mr_error *err)
{
    if (t->n_cols != w->n_cols)
        return MR_ERR(err, MR_E_SCHEMA, "dataset: batch has %zu columns, the dataset %zu", t->n_cols, w->n_cols);
    for (size_t j = 0; j < t->n_cols; j++)
        if (strcmp(t->cols[j]->name, w->names[j]) || t->cols[j]->type != w->types[j])
            return MR_ERR(err, MR_E_SCHEMA, "dataset: batch column %zu is '%s' (%s), expected '%s' (%s)", j + 1,
                          t->cols[j]->name, mr_dtype_name(t->cols[j]->type), w->names[j],
                          mr_dtype_name(w->types[j]));
    return MR_OK;
}

/* Hive-style escaping of a partition value for a path segment: bytes that
 * are special in paths, URLs or Hive (and control bytes) become %XX, and a
 * leading '.' too, so "." and ".." cannot name directories. */
static mr_status escape_segment(mr_buf *b, const char *s, size_t len)
{
    static const char special[] = "\"#%'*/:=?\\{[]^";
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        int esc = ch < 0x20 || ch == 0x7f || (ch && strchr(special, ch)) || (i == 0 && ch == '.');
        mr_status rc = esc ? mr_buf_printf(b, "%%%02X", ch) : mr_buf_append(b, s + i, 1);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

/* The directory of row i ("k=v/k2=v2"), into b. */
static mr_status row_dir(const mr_dataset_writer *w, const mr_table *t, size_t i, mr_buf *b, mr_buf *tmp)
{
    b->len = 0;
    for (size_t k = 0; k < w->n_pcols; k++) {
        const mr_column *c = t->cols[w->pidx[k]];
        mr_status rc = k ? mr_buf_puts(b, "/") : MR_OK;
        if (rc == MR_OK) rc = escape_segment(b, w->pnames[k], strlen(w->pnames[k]));
        if (rc == MR_OK) rc = mr_buf_puts(b, "=");
        if (rc != MR_OK) return rc;
        if (mr_column_is_null(c, i)) {
            rc = mr_buf_puts(b, NULL_PARTITION);
        } else if (c->type == MR_T_STRING) {
            size_t l;
            const char *s = mr_column_str(c, i, &l);
            rc = escape_segment(b, s, l);
        } else {
            tmp->len = 0;
            rc = mr_column_format(c, i, tmp);
            if (rc == MR_OK) rc = escape_segment(b, tmp->data, tmp->len);
        }
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

static void get_value(const mr_column *c, size_t i, tval *v)
{
    memset(v, 0, sizeof *v);
    if (mr_column_is_null(c, i)) {
        v->is_null = 1;
        return;
    }
    switch (c->type) {
    case MR_T_BOOL: v->i = ((const uint8_t *)c->data)[i]; break;
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: v->i = ((const int64_t *)c->data)[i]; break;
    case MR_T_DATE: v->i = ((const int32_t *)c->data)[i]; break;
    case MR_T_FLOAT64: v->f = ((const double *)c->data)[i]; break;
    case MR_T_FLOAT32: v->f = ((const float *)c->data)[i]; break;
    default: break;
    }
}

static uint64_t dir_hash(const char *s, size_t len)
{
    mr_hash128 h = mr_hash_bytes(s, len);
    return h.lo;
}

static mr_status grow_slots(mr_dataset_writer *w)
{
    size_t n = w->n_slots ? w->n_slots * 2 : 64;
    size_t *s = mr_calloc(n, sizeof *s);
    if (!s) return MR_E_NOMEM;
    for (size_t p = 0; p < w->n_parts; p++) {
        size_t h = (size_t)dir_hash(w->parts[p].dir, strlen(w->parts[p].dir)) & (n - 1);
        while (s[h]) h = (h + 1) & (n - 1);
        s[h] = p + 1;
    }
    mr_free(w->slots);
    w->slots = s;
    w->n_slots = n;
    return MR_OK;
}

/* Finds or creates the partition of row i whose directory is dir. */
static mr_status find_part(mr_dataset_writer *w, const mr_table *t, size_t i, const mr_buf *dir, size_t *out,
                           mr_error *err)
{
    if (w->n_slots == 0 || (w->n_parts + 1) * 2 > w->n_slots)
        if (grow_slots(w) != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    const char *d = dir->len ? dir->data : "";
    size_t h = (size_t)dir_hash(d, dir->len) & (w->n_slots - 1);
    while (w->slots[h]) {
        size_t p = w->slots[h] - 1;
        if (!strcmp(w->parts[p].dir, d)) {
            *out = p;
            return MR_OK;
        }
        h = (h + 1) & (w->n_slots - 1);
    }
    if (w->n_parts == w->cap_parts) {
        size_t nc = w->cap_parts ? w->cap_parts * 2 : 8;
        wpart *np = mr_realloc(w->parts, nc * sizeof *np);
        if (!np) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        w->parts = np;
        w->cap_parts = nc;
    }
    wpart *p = &w->parts[w->n_parts];
    memset(p, 0, sizeof *p);
    p->dir = mr_strndup(d, dir->len);
    if (!p->dir) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    w->n_parts++; /* from here the part is owned by w (freed with it) */
    for (size_t k = 0; k < w->n_pcols; k++) {
        const mr_column *c = t->cols[w->pidx[k]];
        get_value(c, i, &p->vals[k]);
        if (c->type == MR_T_STRING && !p->vals[k].is_null) {
            size_t l;
            const char *s = mr_column_str(c, i, &l);
            p->vals[k].s = mr_strndup(s, l);
            p->vals[k].len = l;
            if (!p->vals[k].s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
    }
    w->slots[h] = w->n_parts;
    *out = w->n_parts - 1;
    return MR_OK;
}

static mr_status close_shard(mr_dataset_writer *w, wpart *p, mr_error *err)
{
    if (!p->pw) return MR_OK;
    mr_parquet_writer *pw = p->pw;
    p->pw = NULL;
    w->n_open--;
    wshard *sh = &w->shards[p->shard];
    /* The writer hashed every byte it wrote (the footer too, at close): no
     * second read of the file. */
    mr_status rc = mr_parquet_writer_close(pw, err);
    if (rc != MR_OK) return rc;
    mr_hash_hex(mr_hasher_digest(p->hasher), sh->hash);
    char *abs = mr_path_join(w->dir, sh->path);
    if (!abs) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    struct stat sb;
    if (stat(abs, &sb) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot stat", abs);
    else sh->bytes = (uint64_t)sb.st_size;
    mr_free(abs);
    return rc;
}

static mr_status open_shard(mr_dataset_writer *w, size_t part, mr_error *err)
{
    if (w->n_open >= MR_DATASET_MAX_OPEN_SHARDS) { /* finish the least recently written shard */
        size_t victim = SIZE_MAX;
        for (size_t q = 0; q < w->n_parts; q++)
            if (w->parts[q].pw && (victim == SIZE_MAX || w->parts[q].lru < w->parts[victim].lru)) victim = q;
        if (victim != SIZE_MAX) {
            mr_status rc = close_shard(w, &w->parts[victim], err);
            if (rc != MR_OK) return rc;
        }
    }
    wpart *p = &w->parts[part];
    if (w->n_shards == w->cap_shards) {
        size_t nc = w->cap_shards ? w->cap_shards * 2 : 16;
        wshard *ns = mr_realloc(w->shards, nc * sizeof *ns);
        if (!ns) return MR_ERR(err, MR_E_NOMEM, "out of memory");
        w->shards = ns;
        w->cap_shards = nc;
    }
    wshard *sh = &w->shards[w->n_shards];
    memset(sh, 0, sizeof *sh);
    sh->part = part;
    sh->st = mr_calloc(w->n_cols, sizeof *sh->st);
    sh->path = p->dir[0] ? mr_asprintf("%s/part-%05zu.parquet", p->dir, w->n_shards)
                         : mr_asprintf("part-%05zu.parquet", w->n_shards);
    w->n_shards++;
    if (!sh->st || !sh->path) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    char *abs = mr_path_join(w->dir, sh->path);
    if (!abs) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    if (p->dir[0]) {
        char *d = mr_path_join(w->dir, p->dir);
        rc = d ? mr_fs_mkdirs(d, err) : MR_ERR(err, MR_E_NOMEM, "out of memory");
        mr_free(d);
    }
    mr_parquet_write_opts o;
    mr_parquet_write_opts_init(&o);
    o.codec = w->codec;
    /* zstd level 1 unless told: on float-heavy data it compresses within
     * ~10% of level 3 (still smaller than snappy) at about half the CPU,
     * and ingest is compression-bound. */
    o.level = w->level ? w->level : w->codec == MR_PQ_ZSTD ? DATASET_ZSTD_LEVEL : 0;
    o.row_group_rows = w->rg_rows;
    static const char *const kv_k[] = {"millrace.dataset"};
    static const char *const kv_v[] = {MR_DATASET_FORMAT};
    o.kv_keys = kv_k;
    o.kv_values = kv_v;
    o.n_kv = 1;
    if (rc == MR_OK && !p->hasher) rc = mr_hasher_new(&p->hasher, err);
    if (rc == MR_OK) mr_hasher_reset(p->hasher);
    if (rc == MR_OK) rc = mr_parquet_writer_open(abs, &o, &p->pw, err);
    mr_free(abs);
    if (rc == MR_OK && mr__pq_writer_set_kinds(p->pw, w->fkinds, w->n_fcols) != MR_OK)
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc != MR_OK) return rc;
    mr__pq_writer_hash(p->pw, p->hasher);
    p->shard = w->n_shards - 1;
    w->n_open++;
    return MR_OK;
}

/* Rows the partition's next row group takes at most: a full row group, or
 * what still fits in its open shard. */
static size_t next_group(const mr_dataset_writer *w, const wpart *p)
{
    size_t left = w->rows_per_shard - (p->pw ? (size_t)w->shards[p->shard].rows : 0);
    return left < w->rg_rows ? left : w->rg_rows;
}

/* The bytes of a row's values (a fixed-width value its width, null or not; a string or binary
 * value its length): what a row group's byte budget counts, a function of the row alone.
 * Computed from what a table's columns are once (the fixed widths' sum, the string columns),
 * not by asking every column's type for every row. */
typedef struct row_sizer {
    const mr_table *t;
    uint64_t fixed; /* the fixed-width columns' widths (1 when that is 0 and there is no string) */
    size_t n_str;   /* string and binary columns */
    size_t str[64]; /* their indices, when n_str <= 64 (the loop then skips the fixed-width columns) */
} row_sizer;

static void sizer_init(row_sizer *z, const mr_table *t)
{
    z->t = t;
    z->fixed = 0;
    z->n_str = 0;
    for (size_t j = 0; j < t->n_cols; j++) {
        if (t->cols[j]->type == MR_T_STRING) {
            if (z->n_str < 64) z->str[z->n_str] = j;
            z->n_str++;
        } else
            z->fixed += mr_dtype_width(t->cols[j]->type);
    }
    if (!z->n_str && !z->fixed) z->fixed = 1; /* columns of width 0 only: count rows */
}

static inline uint64_t str_bytes(const mr_column *c, size_t i)
{
    if (mr_column_is_null(c, i)) return 0;
    const mr_column *d = c->codes ? c->dict : c;
    size_t r = c->codes ? (size_t)c->codes[i] : i;
    return (uint64_t)(d->offsets[r + 1] - d->offsets[r]);
}

static uint64_t sizer_row(const row_sizer *z, size_t i)
{
    uint64_t b = z->fixed;
    if (z->n_str <= 64) {
        for (size_t k = 0; k < z->n_str; k++) b += str_bytes(z->t->cols[z->str[k]], i);
        return b;
    }
    for (size_t j = 0; j < z->t->n_cols; j++)
        if (z->t->cols[j]->type == MR_T_STRING) b += str_bytes(z->t->cols[j], i);
    return b;
}

/* The bytes of rows [b, e) of t: sizer_row summed. */
static uint64_t rows_bytes(const mr_table *t, size_t b, size_t e)
{
    row_sizer z;
    sizer_init(&z, t);
    if (!z.n_str) return (uint64_t)(e - b) * z.fixed;
    uint64_t sum = 0;
    for (size_t i = b; i < e; i++) sum += sizer_row(&z, i);
    return sum;
}

/* Of rows [off, off + avail) of src, how many the partition's current row
 * group takes, when it already holds have rows of have_bytes bytes. A group
 * ends at next_group's row count, or at the row that brings its bytes to
 * rg_bytes (that row included): cuts that depend on the rows alone, however
 * they arrive in batches. *full: the group is complete with them. */
static size_t group_take(const mr_dataset_writer *w, const wpart *p, const mr_table *src, size_t off, size_t avail,
                         size_t have, uint64_t have_bytes, int *full, uint64_t *bytes_out)
{
    size_t max_rows = next_group(w, p);
    size_t room = max_rows > have ? max_rows - have : 0;
    uint64_t bytes = have_bytes;
    size_t k = 0;
    row_sizer z;
    sizer_init(&z, src);
    if (bytes < w->rg_bytes && !z.n_str) { /* every row the same width: divide */
        uint64_t left = w->rg_bytes - bytes; /* rounded up without overflow: rg_bytes may be SIZE_MAX */
        uint64_t rows_to_budget = left / z.fixed + (left % z.fixed != 0);
        k = rows_to_budget < room ? (size_t)rows_to_budget : room;
        if (k > avail) k = avail;
        bytes += k * z.fixed;
    } else {
        while (k < room && k < avail && bytes < w->rg_bytes) bytes += sizer_row(&z, off + k++);
    }
    *full = have + k >= max_rows || bytes >= w->rg_bytes;
    if (bytes_out) *bytes_out = bytes - have_bytes;
    return k;
}

/* Writes rows [b, e) of src (the file columns) as one row group of the
 * partition's shard, opening and closing shards as they fill. */
static mr_status write_group(mr_dataset_writer *w, size_t part, const mr_table *src, size_t b, size_t e, mr_error *err)
{
    wpart *p = &w->parts[part];
    mr_status rc = MR_OK;
    p->lru = ++w->tick;
    if (!p->pw) {
        rc = open_shard(w, part, err);
        if (rc != MR_OK) return rc;
        p = &w->parts[part];
    }
    wshard *sh = &w->shards[p->shard];
    for (size_t f = 0; f < src->n_cols; f++)
        if (cstat_update(&sh->st[w->fcols[f]], src->cols[f], b, e) != MR_OK)
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
    rc = mr__pq_writer_write_range(p->pw, src, b, e, err);
    if (rc != MR_OK) return rc;
    sh->rows += e - b;
    sh->row_groups++;
    if (sh->rows >= w->rows_per_shard) rc = close_shard(w, p, err);
    return rc;
}

/* Writes the partition's accumulated rows in row groups (group_take: of
 * rg_rows rows or rg_bytes bytes, and shards of rows_per_shard); keeps a
 * partial row group unless final. */
static mr_status flush_part(mr_dataset_writer *w, size_t part, int final, mr_error *err)
{
    wpart *p = &w->parts[part];
    mr_status rc = MR_OK;
    size_t off = 0, n = p->acc ? p->acc->n_rows : 0;
    p->lru = ++w->tick;
    uint64_t written = 0;
    while (off < n) {
        int full = 0;
        uint64_t gb = 0;
        size_t take = group_take(w, &w->parts[part], w->parts[part].acc, off, n - off, 0, 0, &full, &gb);
        if (!full) {
            if (!final) break;
            take = n - off;
        }
        rc = write_group(w, part, w->parts[part].acc, off, off + take, err);
        if (rc != MR_OK) return rc;
        off += take;
        written += gb;
    }
    p = &w->parts[part];
    if (off == n) {
        mr_table_free(p->acc);
        p->acc = NULL;
        p->acc_bytes = 0;
    } else if (off > 0) {
        mr_table *rest = NULL;
        rc = mr_table_slice(p->acc, off, n, &rest, err);
        if (rc != MR_OK) return rc;
        mr_table_free(p->acc);
        p->acc = rest;
        p->acc_bytes -= written;
    }
    if (final) rc = close_shard(w, p, err);
    return rc;
}

/* Appends rows [b, e) of src to the partition's accumulated rows. */
static mr_status accumulate(mr_dataset_writer *w, size_t part, const mr_table *src, size_t b, size_t e, mr_error *err)
{
    mr_table *rows = NULL;
    mr_status rc = mr_table_slice(src, b, e, &rows, err);
    if (rc != MR_OK) return rc;
    wpart *p = &w->parts[part];
    p->acc_bytes += rows_bytes(src, b, e);
    if (!p->acc) {
        p->acc = rows;
        return MR_OK;
    }
    rc = mr_table_append(p->acc, rows, err);
    mr_table_free(rows);
    return rc;
}

/* Appends rows idx[0..n) (all n rows of t when idx is NULL) of the file
 * columns of t to partition part. Without idx, whole row groups are written
 * straight from t; only the rows that complete the accumulated partial group,
 * and the rows left over for the next one, are copied. The row groups are
 * the same either way. */
static mr_status route(mr_dataset_writer *w, const mr_table *t, size_t part, const uint32_t *idx, size_t n,
                       mr_error *err)
{
    mr_column *view_cols[256];
    mr_column **vc = w->n_fcols <= 256 ? view_cols : mr_calloc(w->n_fcols, sizeof *vc);
    if (!vc) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t f = 0; f < w->n_fcols; f++) vc[f] = t->cols[w->fcols[f]];
    mr_table view = {.n_rows = t->n_rows, .n_cols = w->n_fcols, .cols = vc};
    mr_status rc = MR_OK;
    if (idx) {
        mr_table *rows = NULL;
        rc = mr_table_take(&view, idx, n, &rows, err);
        if (rc == MR_OK) {
            wpart *p = &w->parts[part];
            p->acc_bytes += rows_bytes(rows, 0, rows->n_rows);
            if (!p->acc) {
                p->acc = rows;
            } else {
                rc = mr_table_append(p->acc, rows, err);
                mr_table_free(rows);
            }
        }
        if (rc == MR_OK && (w->parts[part].acc->n_rows >= next_group(w, &w->parts[part]) ||
                            w->parts[part].acc_bytes >= w->rg_bytes))
            rc = flush_part(w, part, 0, err);
        goto done;
    }
    size_t off = 0;
    if (w->parts[part].acc) { /* complete the partial group first */
        int full = 0;
        size_t add = group_take(w, &w->parts[part], &view, 0, n, w->parts[part].acc->n_rows,
                                w->parts[part].acc_bytes, &full, NULL);
        rc = accumulate(w, part, &view, 0, add, err);
        off = add;
        if (rc == MR_OK && full) rc = flush_part(w, part, 0, err);
    }
    while (rc == MR_OK && !w->parts[part].acc && off < n) {
        int full = 0;
        size_t take = group_take(w, &w->parts[part], &view, off, n - off, 0, 0, &full, NULL);
        if (!full) break;
        rc = write_group(w, part, &view, off, off + take, err);
        off += take;
    }
    if (rc == MR_OK && off < n) rc = accumulate(w, part, &view, off, n, err);
done:
    if (vc != view_cols) mr_free(vc);
    return rc;
}

mr_status mr_dataset_writer_write(mr_dataset_writer *w, const mr_table *t, mr_error *err)
{
    if (w->failed) return MR_ERR(err, MR_E_STATE, "dataset writer: an earlier write failed");
    mr_status rc = w->have_schema ? check_schema(w, t, err) : fix_schema(w, t, err);
    uint32_t *part_of = NULL, *idx = NULL;
    size_t *count = NULL;
    mr_buf dir, tmp;
    mr_buf_init(&dir);
    mr_buf_init(&tmp);
    if (rc != MR_OK || t->n_rows == 0) goto done;
    if (t->n_rows > UINT32_MAX) {
        rc = MR_ERR(err, MR_E_LIMIT, "dataset: batch of %zu rows is too large (max %u)", t->n_rows, UINT32_MAX);
        goto done;
    }
    w->rows += t->n_rows;
    if (w->n_pcols == 0) {
        if (w->n_parts == 0) {
            size_t p0;
            rc = find_part(w, t, 0, &dir, &p0, err);
            if (rc != MR_OK) goto done;
        }
        rc = route(w, t, 0, NULL, t->n_rows, err);
        goto done;
    }
    /* Route rows: partition of each row, then a stable counting sort. */
    part_of = mr_malloc(t->n_rows * sizeof *part_of);
    idx = mr_malloc(t->n_rows * sizeof *idx);
    if (!part_of || !idx) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < t->n_rows; i++) {
        size_t p;
        if (row_dir(w, t, i, &dir, &tmp) != MR_OK) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        rc = find_part(w, t, i, &dir, &p, err);
        if (rc != MR_OK) goto done;
        part_of[i] = (uint32_t)p;
    }
    count = mr_calloc(w->n_parts + 1, sizeof *count);
    if (!count) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < t->n_rows; i++) count[part_of[i] + 1]++;
    for (size_t p = 0; p < w->n_parts; p++) count[p + 1] += count[p];
    size_t *pos = count; /* pos[p]: next slot of partition p; after the fill, pos[p] = end of p */
    for (size_t i = 0; i < t->n_rows; i++) idx[pos[part_of[i]]++] = (uint32_t)i;
    size_t begin = 0;
    for (size_t p = 0; p < w->n_parts && rc == MR_OK; p++) {
        size_t end = pos[p];
        if (end > begin) rc = route(w, t, p, idx + begin, end - begin, err);
        begin = end;
    }
done:
    mr_free(part_of);
    mr_free(idx);
    mr_free(count);
    mr_buf_free(&dir);
    mr_buf_free(&tmp);
    if (rc != MR_OK) w->failed = 1;
    return rc;
}

/* ---- manifest ------------------------------------------------------------------------ */

static json_t *stats_json(const mr_dataset_writer *w, const wshard *sh)
{
    json_t *cols = json_object();
    if (!cols) return NULL;
    for (size_t f = 0; f < w->n_fcols; f++) {
        size_t j = w->fcols[f];
        const cstat *st = &sh->st[j];
        json_t *o = json_object(), *mn = NULL, *mx = NULL;
        if (!o || json_object_set_new(cols, w->names[j], o)) goto fail;
        if (st->has && !st->str_too_long) {
            int fl = w->types[j] == MR_T_FLOAT64 || w->types[j] == MR_T_FLOAT32;
            mn = value_json(w->types[j], st->mn_i, fl ? st->mn_f : 0, st->mn_s, st->mn_len);
            mx = value_json(w->types[j], st->mx_i, fl ? st->mx_f : 0, st->mx_s, st->mx_len);
        }
        if (!mn || !mx) { /* unknown (all null, too long, not UTF-8) */
            json_decref(mn);
            json_decref(mx);
            mn = json_null();
            mx = json_null();
        }
        int bad = json_object_set_new(o, "min", mn); /* each set takes its value, even failing: both run */
        bad |= json_object_set_new(o, "max", mx);
        if (bad || json_object_set_new(o, "null_count", json_integer((json_int_t)st->nulls))) goto fail;
        if ((w->types[j] == MR_T_FLOAT64 || w->types[j] == MR_T_FLOAT32) &&
            json_object_set_new(o, "nan_count", json_integer((json_int_t)st->nans)))
            goto fail;
    }
    return cols;
fail:
    json_decref(cols);
    return NULL;
}

/* Any allocation failure while the manifest is built or dumped is out of
 * memory: the sets below are not all checked, and jansson can lose a key
 * or a character and still dump (the torture read back a manifest whose
 * shard path had lost a character). */
static mr_status write_manifest(mr_dataset_writer *w, mr_dataset_summary *sum, mr_error *err)
{
    uint64_t oom0 = mr_alloc_failures_here();
    mr_status rc = MR_OK;
    char *text = NULL, *path = NULL;
    json_t *root = json_object(), *schema = json_array(), *pby = json_array(), *shards = json_array();
    if (!root || !schema || !pby || !shards) { /* none is attached yet: each is freed here */
        json_decref(schema);
        json_decref(pby);
        json_decref(shards);
        schema = pby = shards = NULL;
        goto nomem;
    }
    json_object_set_new(root, "format", json_string(MR_DATASET_FORMAT));
    json_object_set_new(root, "created_by", json_string("millrace " MILLRACE_VERSION));
    json_object_set_new(root, "schema", schema);
    json_object_set_new(root, "partition_by", pby);
    json_object_set_new(root, "total_rows", json_integer((json_int_t)w->rows));
    json_object_set_new(root, "shards", shards);
    uint64_t bytes = 0;
    for (size_t j = 0; j < w->n_cols; j++) {
        uint64_t nulls = 0;
        for (size_t s = 0; s < w->n_shards; s++) nulls += w->shards[s].st[j].nulls;
        if (w->is_part[j])
            for (size_t s = 0; s < w->n_shards; s++) {
                size_t k = 0;
                while (w->pidx[k] != j) k++;
                if (w->parts[w->shards[s].part].vals[k].is_null) nulls += w->shards[s].rows;
            }
        json_t *c = json_pack("{s:s, s:s, s:b}", "name", w->names[j], "type", mr_dtype_name(w->types[j]), "nullable",
                              nulls > 0);
        if (!c || json_array_append_new(schema, c)) goto nomem;
        if (w->kinds[j].int_bits || w->kinds[j].flags || w->types[j] == MR_T_DECIMAL) { /* absent = the plain type */
            char kn[24];
            if (json_object_set_new(c, "kind", json_string(mr_kind_name(w->types[j], w->kinds[j], kn, sizeof kn))))
                goto nomem;
        }
    }
    for (size_t k = 0; k < w->n_pcols; k++) {
        json_t *c = json_pack("{s:s, s:s}", "name", w->pnames[k], "type", mr_dtype_name(w->types[w->pidx[k]]));
        if (!c || json_array_append_new(pby, c)) goto nomem;
    }
    for (size_t s = 0; s < w->n_shards; s++) {
        const wshard *sh = &w->shards[s];
        const wpart *p = &w->parts[sh->part];
        json_t *part = json_object();
        if (!part) goto nomem;
        for (size_t k = 0; k < w->n_pcols; k++) {
            const tval *v = &p->vals[k];
            json_t *jv = v->is_null ? json_null()
                                    : value_json(w->types[w->pidx[k]], v->i, v->f, v->s, v->len);
            if (!jv && mr_alloc_failures_here() != oom0) {
                json_decref(part);
                goto nomem;
            }
            if (!jv) {
                json_decref(part);
                rc = MR_ERR(err, MR_E_INVALID_ARG, "dataset: partition value of '%s' in '%s' is not valid UTF-8",
                            w->pnames[k], p->dir);
                goto done;
            }
            json_object_set_new(part, w->pnames[k], jv);
        }
        json_t *cols = stats_json(w, sh);
        json_t *o = cols ? json_pack("{s:s, s:o, s:I, s:I, s:s, s:I, s:o}", "path", sh->path, "partition", part, "rows",
                                     (json_int_t)sh->rows, "bytes", (json_int_t)sh->bytes, "hash", sh->hash,
                                     "row_groups", (json_int_t)sh->row_groups, "columns", cols)
                         : NULL;
        if (!cols) json_decref(part);
        if (!o || json_array_append_new(shards, o)) goto nomem;
        bytes += sh->bytes;
    }
    text = json_dumps(root, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
    path = mr_path_join(w->dir, MR_DATASET_MANIFEST);
    if (!text || !path || mr_alloc_failures_here() != oom0) goto nomem;
    size_t len = strlen(text);
    rc = mr_fs_write_atomic(path, text, len, err);
    if (rc == MR_OK && sum) {
        sum->rows = w->rows;
        sum->shards = w->n_shards;
        sum->partitions = w->n_parts;
        sum->bytes = bytes;
    }
    goto done;
nomem:
    rc = MR_ERR(err, MR_E_NOMEM, "out of memory writing the manifest");
done:
    if (!root) {
        json_decref(schema);
        json_decref(pby);
        json_decref(shards);
    }
    json_decref(root);
    free(text); /* allocated by jansson */
    mr_free(path);
    return rc;
}

mr_status mr_dataset_writer_close(mr_dataset_writer *w, mr_dataset_summary *summary, mr_error *err)
{
    if (!w) return MR_ERR(err, MR_E_INVALID_ARG, "dataset writer is NULL");
    mr_status rc = MR_OK;
    if (summary) memset(summary, 0, sizeof *summary);
    if (w->failed) {
        rc = MR_ERR(err, MR_E_STATE, "dataset writer: an earlier write failed; no manifest written");
        goto done;
    }
    for (size_t p = 0; p < w->n_parts && rc == MR_OK; p++) rc = flush_part(w, p, 1, err);
    if (rc == MR_OK) rc = write_manifest(w, summary, err);
done:
    mr_dataset_writer_free(w);
    return rc;
}

mr_status mr_dataset_write_table(const char *dir, const mr_table *t, const mr_dataset_write_opts *opts,
                                 mr_dataset_summary *summary, mr_error *err)
{
    mr_dataset_writer *w;
    mr_status rc = mr_dataset_writer_open(dir, opts, &w, err);
    if (rc != MR_OK) return rc;
    rc = mr_dataset_writer_write(w, t, err);
    if (rc != MR_OK) {
        mr_dataset_writer_free(w);
        return rc;
    }
    return mr_dataset_writer_close(w, summary, err);
}

/* ---- reader: manifest parsing and validation ------------------------------------------ */

static void shard_free(mr__ds_shard *s, const mr_dataset *ds)
{
    mr_free(s->path);
    mr_free(s->abs_path);
    if (s->stats)
        for (size_t j = 0; j < ds->n_cols; j++)
            if (ds->types[j] == MR_T_STRING && s->stats[j].has_min_max) {
                mr_free((void *)s->stats[j].min.s.ptr);
                mr_free((void *)s->stats[j].max.s.ptr);
            }
    mr_free(s->stats);
}

void mr_dataset_close(mr_dataset *ds)
{
    if (!ds) return;
    for (size_t i = 0; i < ds->n_shards; i++) shard_free(&ds->shards[i], ds);
    for (size_t j = 0; j < ds->n_cols; j++) mr_free(ds->names[j]);
    mr_free(ds->shards);
    mr_free(ds->names);
    mr_strindex_deinit(&ds->name_ix);
    mr_free(ds->types);
    mr_free(ds->kinds);
    mr_free(ds->nullable);
    mr_free(ds->is_part);
    mr_free(ds->dir);
    mr__s3h_unref(ds->s3);
    mr__s3_objs_free(ds->s3_objs, ds->n_s3_objs);
    mr_free(ds);
}

/* ---- a dataset on S3 ------------------------------------------------------------------ */

/* The manifest of s3://BUCKET/PREFIX: one listing of the prefix (kept for
 * s3_check_shards), then a GET of the manifest as listed. */
static mr_status s3_manifest(mr_dataset *ds, const char *dir, char **text, size_t *len, mr_error *err)
{
    char *prefix = NULL;
    mr_status rc = mr__s3h_open(dir, &ds->s3, &prefix, err);
    if (rc != MR_OK) return rc;
    ds->s3_key_at = mr__s3h_key_at(ds->s3);
    size_t pl = strlen(prefix);
    char *lp = pl && prefix[pl - 1] != '/' ? mr_asprintf("%s/", prefix) : mr_strdup(prefix);
    char *key = lp ? mr_asprintf("%s%s", lp, MR_DATASET_MANIFEST) : NULL;
    mr_free(prefix);
    if (!key) {
        mr_free(lp);
        return MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    rc = mr__s3h_list_all(ds->s3, lp, &ds->s3_objs, &ds->n_s3_objs, err);
    if (rc != MR_OK) mr_error_at(err, dir, 0, 0);
    const mr__s3_obj *m = rc == MR_OK ? mr__s3_find(ds->s3_objs, ds->n_s3_objs, key) : NULL;
    if (rc == MR_OK && !m)
        rc = MR_ERR(err, MR_E_NOT_FOUND, "not a millrace dataset: %s has no %s", dir, MR_DATASET_MANIFEST);
    mr_buf b;
    mr_buf_init(&b);
    b.limit = MAX_MANIFEST;
    if (rc == MR_OK) rc = mr__s3h_get(ds->s3, "manifest", key, m->etag, 0, 0, &b, err);
    if (rc == MR_OK) {
        *len = b.len;
        *text = b.data ? b.data : mr_strdup("");
        b.data = NULL;
        if (!*text) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    mr_buf_free(&b);
    mr_free(key);
    mr_free(lp);
    return rc;
}

/* Every shard is there with the manifest's size, by the listing
 * s3_manifest kept (not a request per shard). It gives each shard's ETag,
 * which every later read asks for, and the dataset's version. */
static mr_status s3_check_shards(mr_dataset *ds, mr_error *err)
{
    mr__s3_obj *v = ds->s3_objs;
    size_t n = ds->n_s3_objs;
    mr_status rc = MR_OK;
    const mr__s3_obj **all = mr_malloc((n ? n : 1) * sizeof *all);
    if (!all) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n; i++) all[i] = &v[i];
    if (rc == MR_OK) rc = mr__s3_version(mr__s3h_bucket(ds->s3), all, n, ds->s3_version, err);
    for (size_t i = 0; rc == MR_OK && i < ds->n_shards; i++) {
        mr__ds_shard *sh = &ds->shards[i];
        const mr__s3_obj *got = mr__s3_find(v, n, sh->abs_path + ds->s3_key_at);
        if (!got) {
            MR_ERR(err, MR_E_CORRUPT, "dataset shard '%s' listed in the manifest is missing", sh->path);
            mr_error_at(err, sh->abs_path, 0, 0);
            rc = MR_E_CORRUPT;
        } else if (got->size != sh->bytes) {
            MR_ERR(err, MR_E_CORRUPT, "dataset shard '%s' has %llu bytes, the manifest says %llu", sh->path,
                   (unsigned long long)got->size, (unsigned long long)sh->bytes);
            mr_error_at(err, sh->abs_path, 0, 0);
            rc = MR_E_CORRUPT;
        } else {
            snprintf(sh->etag, sizeof sh->etag, "%s", got->etag);
        }
    }
    mr_free(all);
    return rc;
}

size_t mr_dataset_n_requests(const mr_dataset *ds)
{
    return ds ? mr__s3h_n_requests(ds->s3) : 0;
}

void mr_dataset_request_at(const mr_dataset *ds, size_t i, mr_dataset_request *out)
{
    mr__s3h_request(ds ? ds->s3 : NULL, i, out);
}

/* Stores the typed value v into a stats bound of type t (strings: ownership moves). */
static void to_bound(mr_dtype t, tval *v, mr_dataset_col_stats *st, int is_max)
{
    switch (t) {
    case MR_T_BOOL:
        if (is_max) st->max.b = (int)v->i;
        else st->min.b = (int)v->i;
        break;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
        if (is_max) st->max.f = v->f;
        else st->min.f = v->f;
        break;
    case MR_T_STRING:
        if (is_max) st->max.s.ptr = v->s, st->max.s.len = v->len;
        else st->min.s.ptr = v->s, st->min.s.len = v->len;
        v->s = NULL;
        break;
    default:
        if (is_max) st->max.i = v->i;
        else st->min.i = v->i;
        break;
    }
}

static const char *ds_name_of(const void *ctx, size_t id) { return ((char *const *)ctx)[id]; }

static mr_status corrupt(mr_error *err, const char *mpath, const char *what, const char *detail)
{
    MR_ERR(err, MR_E_CORRUPT, "dataset manifest: %s%s%s", what, detail ? ": " : "", detail ? detail : "");
    mr_error_at(err, mpath, 0, 0);
    return MR_E_CORRUPT;
}

static json_int_t get_uint(const json_t *o, const char *key, int *bad)
{
    const json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0) {
        *bad = 1;
        return 0;
    }
    return json_integer_value(v);
}

static mr_status parse_shard(mr_dataset *ds, const json_t *js, size_t i, const char *mpath, mr_error *err)
{
    mr__ds_shard *sh = &ds->shards[i];
    char what[96];
    snprintf(what, sizeof what, "shard %zu", i);
    const char *path = json_string_value(json_object_get(js, "path"));
    if (!json_is_object(js) || !path) return corrupt(err, mpath, what, "missing \"path\"");
    uint64_t oom0 = mr_alloc_failures_here();
    sh->path = mr_path_normalize(path, 0);
    if (!sh->path && mr_alloc_failures_here() != oom0) /* NULL for a bad path and for no memory */
        return MR_ERR(err, MR_E_NOMEM, "out of memory reading the dataset manifest");
    if (!sh->path || strcmp(sh->path, path))
        return corrupt(err, mpath, what, "\"path\" must be a normalised relative path inside the dataset");
    sh->abs_path = mr_path_join(ds->dir, sh->path);
    sh->stats = mr_calloc(ds->n_cols ? ds->n_cols : 1, sizeof *sh->stats);
    if (!sh->abs_path || !sh->stats) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    int bad = 0, jr = 0;
    sh->rows = (uint64_t)get_uint(js, "rows", &bad);
    sh->bytes = (uint64_t)get_uint(js, "bytes", &bad);
    sh->row_groups = (uint64_t)get_uint(js, "row_groups", &bad);
    const char *hash = json_string_value(json_object_get(js, "hash"));
    mr_hash128 h;
    if (bad || !hash || strlen(hash) != MR_HASH_HEX_LEN || mr_hash_parse(hash, &h) != MR_OK)
        return corrupt(err, mpath, what, "\"rows\", \"bytes\", \"row_groups\" and \"hash\" are required");
    memcpy(sh->hash, hash, MR_HASH_HEX_LEN + 1);
    const json_t *part = json_object_get(js, "partition");
    const json_t *cols = json_object_get(js, "columns");
    if ((ds->n_part && !json_is_object(part)) || !json_is_object(cols))
        return corrupt(err, mpath, what, "\"partition\" and \"columns\" must be objects");
    for (size_t j = 0; j < ds->n_cols; j++) {
        mr_dataset_col_stats *st = &sh->stats[j];
        const json_t *jc = json_object_get(ds->is_part[j] ? part : cols, ds->names[j]);
        if (!jc) {
            snprintf(what, sizeof what, "shard '%s'", sh->path);
            return corrupt(err, mpath, what, ds->is_part[j] ? "a partition value is missing" : "column statistics are missing");
        }
        tval mn, mx;
        if (ds->is_part[j]) {
            if ((jr = json_value(jc, ds->types[j], &mn)) != 0) goto bad_value;
            if (mn.is_null) {
                st->null_count = sh->rows;
            } else {
                mx = mn;
                if (ds->types[j] == MR_T_STRING) {
                    mx.s = mr_strndup(mn.s, mn.len);
                    if (!mx.s) {
                        tval_free(&mn);
                        return MR_ERR(err, MR_E_NOMEM, "out of memory");
                    }
                }
                st->has_min_max = 1;
                if (isnan(mn.f)) st->has_min_max = 0, st->nan_count = sh->rows;
                to_bound(ds->types[j], &mn, st, 0);
                to_bound(ds->types[j], &mx, st, 1);
                tval_free(&mx);
            }
            tval_free(&mn);
            continue;
        }
        if (!json_is_object(jc)) goto bad_value;
        st->null_count = (uint64_t)get_uint(jc, "null_count", &bad);
        if (json_object_get(jc, "nan_count")) st->nan_count = (uint64_t)get_uint(jc, "nan_count", &bad);
        if (bad || st->null_count > sh->rows) goto bad_value;
        if ((jr = json_value(json_object_get(jc, "min"), ds->types[j], &mn)) != 0) goto bad_value;
        if ((jr = json_value(json_object_get(jc, "max"), ds->types[j], &mx)) != 0) {
            tval_free(&mn);
            goto bad_value;
        }
        if (!mn.is_null && !mx.is_null) {
            st->has_min_max = 1;
            to_bound(ds->types[j], &mn, st, 0);
            to_bound(ds->types[j], &mx, st, 1);
        }
        tval_free(&mn);
        tval_free(&mx);
        continue;
    bad_value:
        if (jr == -2) return MR_ERR(err, MR_E_NOMEM, "out of memory reading the manifest");
        snprintf(what, sizeof what, "shard '%s', column '%s'", sh->path, ds->names[j]);
        return corrupt(err, mpath, what, "malformed value or statistics");
    }
    return MR_OK;
}

/* Distinct partitions: shards with the same directory share one (a hash
 * index over the directories, so many partitions cost O(1) each). */
static mr_status index_partitions(mr_dataset *ds, mr_error *err)
{
    char **dirs = mr_calloc(ds->n_shards ? ds->n_shards : 1, sizeof *dirs); /* of partition p */
    mr_strindex ix;
    mr_strindex_init(&ix);
    mr_status rc = dirs ? mr_strindex_reserve(&ix, ds->n_shards) : MR_E_NOMEM;
    ds->n_partitions = 0;
    for (size_t i = 0; rc == MR_OK && i < ds->n_shards; i++) {
        const char *pi = ds->shards[i].path, *si = strrchr(pi, '/');
        char *d = mr_strndup(pi, si ? (size_t)(si - pi) : 0);
        if (!d) {
            rc = MR_E_NOMEM;
            break;
        }
        ssize_t p = mr_strindex_find(&ix, d, ds_name_of, dirs);
        if (p < 0) {
            p = (ssize_t)ds->n_partitions;
            dirs[ds->n_partitions++] = d;
            rc = mr_strindex_add(&ix, (size_t)p, ds_name_of, dirs, NULL);
        } else {
            mr_free(d);
        }
        ds->shards[i].partition = (size_t)p;
    }
    for (size_t p = 0; dirs && p < ds->n_partitions; p++) mr_free(dirs[p]);
    mr_free(dirs);
    mr_strindex_deinit(&ix);
    return rc == MR_OK ? MR_OK : MR_ERR(err, rc, "out of memory");
}

mr_status mr_dataset_open(const char *dir, mr_dataset **out, mr_error *err)
{
    *out = NULL;
    mr_status rc = MR_OK;
    char *text = NULL;
    size_t len = 0;
    json_t *root = NULL;
    mr_dataset *ds = mr_calloc(1, sizeof *ds);
    char *mpath = mr_path_join(dir, MR_DATASET_MANIFEST);
    if (!ds || !mpath) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    ds->dir = mr_strdup(dir);
    if (!ds->dir) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    if (mr__is_s3(dir)) {
        rc = s3_manifest(ds, dir, &text, &len, err);
        if (rc != MR_OK) goto done;
    } else {
        if (!mr_fs_exists(mpath)) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "not a millrace dataset: %s has no %s", dir, MR_DATASET_MANIFEST);
            goto done;
        }
        rc = mr_fs_read_file(mpath, MAX_MANIFEST, &text, &len, err);
        if (rc != MR_OK) goto done;
    }
    json_error_t je;
    uint64_t oom0 = mr_alloc_failures_here();
    root = json_loadb(text, len, JSON_ALLOW_NUL, &je);
    if (mr_alloc_failures_here() != oom0) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory reading the dataset manifest");
        goto done;
    }
    if (!root || !json_is_object(root)) {
        MR_ERR(err, MR_E_CORRUPT, "dataset manifest: %s", root ? "not a JSON object" : je.text);
        mr_error_at(err, mpath, root ? 0 : je.line, root ? 0 : je.column);
        rc = MR_E_CORRUPT;
        goto done;
    }
    const char *fmt = json_string_value(json_object_get(root, "format"));
    if (!fmt || strcmp(fmt, MR_DATASET_FORMAT)) {
        rc = corrupt(err, mpath, "unsupported \"format\"", fmt ? fmt : "missing");
        if (fmt) mr_error_hint(err, "this millrace reads %s", MR_DATASET_FORMAT);
        goto done;
    }
    const json_t *schema = json_object_get(root, "schema"), *pby = json_object_get(root, "partition_by");
    const json_t *shards = json_object_get(root, "shards");
    if (!json_is_array(schema) || !json_is_array(pby) || !json_is_array(shards)) {
        rc = corrupt(err, mpath, "\"schema\", \"partition_by\" and \"shards\" must be arrays", NULL);
        goto done;
    }
    size_t n = json_array_size(schema);
    ds->names = mr_calloc(n ? n : 1, sizeof *ds->names);
    ds->types = mr_calloc(n ? n : 1, sizeof *ds->types);
    ds->kinds = mr_calloc(n ? n : 1, sizeof *ds->kinds);
    ds->nullable = mr_calloc(n ? n : 1, sizeof *ds->nullable);
    ds->is_part = mr_calloc(n ? n : 1, sizeof *ds->is_part);
    if (!ds->names || !ds->types || !ds->kinds || !ds->nullable || !ds->is_part) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t j = 0; j < n; j++) {
        const json_t *c = json_array_get(schema, j);
        const char *name = json_string_value(json_object_get(c, "name"));
        const char *type = json_string_value(json_object_get(c, "type"));
        if (!name || !type || mr_dtype_parse(type, &ds->types[j]) != MR_OK || ds->types[j] == MR_T_NULL) {
            rc = corrupt(err, mpath, "schema entry needs \"name\" and a valid \"type\"", name);
            goto done;
        }
        const json_t *jk = json_object_get(c, "kind");
        if (!jk && ds->types[j] == MR_T_DECIMAL) {
            rc = corrupt(err, mpath, "a decimal schema entry needs its \"kind\" (precision and scale)", name);
            goto done;
        }
        if (jk) {
            mr_dtype kt;
            if (!json_is_string(jk) || mr_kind_parse(json_string_value(jk), &kt, &ds->kinds[j]) != MR_OK ||
                kt != ds->types[j]) {
                rc = corrupt(err, mpath, "schema entry has a \"kind\" that is not one of its type's", name);
                goto done;
            }
        }
        ds->names[j] = mr_strdup(name);
        if (!ds->names[j]) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        ds->n_cols++;
        size_t dup;
        rc = mr_strindex_add(&ds->name_ix, j, ds_name_of, ds->names, &dup);
        if (rc != MR_OK) {
            rc = MR_ERR(err, rc, "out of memory");
            goto done;
        }
        if (dup != SIZE_MAX) {
            rc = corrupt(err, mpath, "duplicate column in schema", name);
            goto done;
        }
        ds->nullable[j] = json_is_true(json_object_get(c, "nullable"));
    }
    if (json_array_size(pby) > MR_DATASET_MAX_PARTITION_COLS) {
        rc = corrupt(err, mpath, "too many partition columns", NULL);
        goto done;
    }
    for (size_t k = 0; k < json_array_size(pby); k++) {
        const char *name = json_string_value(json_object_get(json_array_get(pby, k), "name"));
        ssize_t j = name ? mr_dataset_col_index(ds, name) : -1;
        if (j < 0 || ds->is_part[j]) {
            rc = corrupt(err, mpath, "partition column is not in the schema (or listed twice)", name);
            goto done;
        }
        ds->part_cols[ds->n_part++] = (size_t)j;
        ds->is_part[j] = 1;
    }
    size_t ns = json_array_size(shards);
    ds->shards = mr_calloc(ns ? ns : 1, sizeof *ds->shards);
    if (!ds->shards) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    uint64_t total = 0;
    for (size_t i = 0; i < ns; i++) {
        ds->n_shards++;
        rc = parse_shard(ds, json_array_get(shards, i), i, mpath, err);
        if (rc != MR_OK) goto done;
        total += ds->shards[i].rows;
        if (ds->s3) continue; /* checked below, by one listing */
        struct stat sb;
        if (stat(ds->shards[i].abs_path, &sb) != 0) {
            MR_ERR(err, MR_E_CORRUPT, "dataset shard '%s' listed in the manifest is missing", ds->shards[i].path);
            mr_error_at(err, ds->shards[i].abs_path, 0, 0);
            rc = MR_E_CORRUPT;
            goto done;
        }
        if ((uint64_t)sb.st_size != ds->shards[i].bytes) {
            MR_ERR(err, MR_E_CORRUPT, "dataset shard '%s' has %lld bytes, the manifest says %llu", ds->shards[i].path,
                   (long long)sb.st_size, (unsigned long long)ds->shards[i].bytes);
            mr_error_at(err, ds->shards[i].abs_path, 0, 0);
            rc = MR_E_CORRUPT;
            goto done;
        }
    }
    if (ds->s3) {
        rc = s3_check_shards(ds, err);
        mr__s3_objs_free(ds->s3_objs, ds->n_s3_objs);
        ds->s3_objs = NULL;
        ds->n_s3_objs = 0;
        if (rc != MR_OK) goto done;
    }
    int bad = 0;
    ds->n_rows = (uint64_t)get_uint(root, "total_rows", &bad);
    if (bad || ds->n_rows != total) {
        rc = corrupt(err, mpath, "\"total_rows\" does not equal the sum of the shards' rows", NULL);
        goto done;
    }
    rc = index_partitions(ds, err);
done:
    json_decref(root);
    mr_free(text);
    mr_free(mpath);
    if (rc != MR_OK) {
        mr_dataset_close(ds);
        return rc;
    }
    *out = ds;
    return MR_OK;
}

mr_status mr_dataset_verify(const mr_dataset *ds, mr_error *err)
{
    for (size_t i = 0; i < ds->n_shards; i++) {
        mr_hash128 h;
        uint64_t size = 0;
        mr_status rc;
        if (ds->s3) {
            mr_buf b;
            mr_buf_init(&b);
            b.limit = SIZE_MAX;
            rc = mr__s3h_get(ds->s3, "verify", ds->shards[i].abs_path + ds->s3_key_at, ds->shards[i].etag, 0, 0, &b,
                             err);
            h = mr_hash_bytes(b.data ? b.data : "", b.len);
            size = b.len;
            mr_buf_free(&b);
        } else {
            rc = mr_hash_file(ds->shards[i].abs_path, &h, &size, err);
        }
        if (rc != MR_OK) return rc;
        char hex[MR_HASH_HEX_LEN + 1];
        mr_hash_hex(h, hex);
        if (size != ds->shards[i].bytes || strcmp(hex, ds->shards[i].hash)) {
            MR_ERR(err, MR_E_CORRUPT, "dataset shard '%s' does not match its manifest hash (%s, file has %s)",
                   ds->shards[i].path, ds->shards[i].hash, hex);
            mr_error_at(err, ds->shards[i].abs_path, 0, 0);
            return MR_E_CORRUPT;
        }
    }
    return MR_OK;
}

void mr_dataset_set_verify_checksums(mr_dataset *ds, int on) { ds->verify_crc = on != 0; }

/* ---- accessors ------------------------------------------------------------------------- */

const char *mr_dataset_dir(const mr_dataset *ds) { return ds->dir; }
size_t mr_dataset_n_cols(const mr_dataset *ds) { return ds->n_cols; }
const char *mr_dataset_col_name(const mr_dataset *ds, size_t j) { return j < ds->n_cols ? ds->names[j] : NULL; }
mr_dtype mr_dataset_col_type(const mr_dataset *ds, size_t j) { return j < ds->n_cols ? ds->types[j] : MR_T_NULL; }
mr_colkind mr_dataset_col_kind(const mr_dataset *ds, size_t j)
{
    return j < ds->n_cols ? ds->kinds[j] : (mr_colkind){0};
}
int mr_dataset_col_nullable(const mr_dataset *ds, size_t j) { return j < ds->n_cols && ds->nullable[j]; }
ssize_t mr_dataset_col_index(const mr_dataset *ds, const char *name)
{
    return mr_strindex_find(&ds->name_ix, name, ds_name_of, ds->names);
}
size_t mr_dataset_n_partition_cols(const mr_dataset *ds) { return ds->n_part; }
size_t mr_dataset_partition_col(const mr_dataset *ds, size_t k) { return k < ds->n_part ? ds->part_cols[k] : SIZE_MAX; }
uint64_t mr_dataset_n_rows(const mr_dataset *ds) { return ds->n_rows; }
size_t mr_dataset_n_shards(const mr_dataset *ds) { return ds->n_shards; }
size_t mr_dataset_n_partitions(const mr_dataset *ds) { return ds->n_partitions; }

void mr_dataset_shard(const mr_dataset *ds, size_t i, mr_dataset_shard_info *out)
{
    memset(out, 0, sizeof *out);
    if (i >= ds->n_shards) return;
    const mr__ds_shard *s = &ds->shards[i];
    out->path = s->path;
    out->rows = s->rows;
    out->bytes = s->bytes;
    out->row_groups = s->row_groups;
    out->hash = s->hash;
    out->partition = s->partition;
}

const mr_dataset_col_stats *mr_dataset_shard_stats(const mr_dataset *ds, size_t i, size_t j)
{
    if (i >= ds->n_shards || j >= ds->n_cols) return NULL;
    return &ds->shards[i].stats[j];
}
