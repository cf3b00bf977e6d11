/* Dataset scans with filter push-down. Steps, cheapest first:
 *   1. partition pruning: the filter against each partition's values alone;
 *   2. shard skipping: the filter against the manifest's per-shard min/max,
 *      null and NaN counts (no file is opened);
 *   3. row-group skipping: the filter against each row group's Parquet
 *      statistics (only the footer is read);
 *   4. row filtering of the row groups left, reading only the filter's and
 *      the output's columns.
 * A step that proves every row matches (MR_PRUNE_ALL) skips the row filter.
 * The block reader here is shared with the loader (loader.c). */
#include "data/dataset_int.h"
#include "data/s3_int.h"
#include "millrace/value.h"

#include <math.h>
#include <string.h>

/* ---- statistics for mr_expr_prune ------------------------------------------------- */

static void copy_bounds(mr_dtype t, const mr_dataset_col_stats *s, mr_col_stats *o)
{
    o->has_min_max = s->has_min_max;
    switch (t) {
    case MR_T_BOOL:
        o->min.b = s->min.b;
        o->max.b = s->max.b;
        break;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
        o->min.f = s->min.f;
        o->max.f = s->max.f;
        break;
    case MR_T_STRING:
        o->min.s.ptr = s->min.s.ptr;
        o->min.s.len = s->min.s.len;
        o->max.s.ptr = s->max.s.ptr;
        o->max.s.len = s->max.s.len;
        break;
    default:
        o->min.i = s->min.i;
        o->max.i = s->max.i;
        break;
    }
}

/* Stats of every schema column for shard i; part_only: only the partition
 * columns are known (step 1). */
static void shard_stats(const mr_dataset *ds, size_t i, int part_only, mr_col_stats *out)
{
    const mr__ds_shard *sh = &ds->shards[i];
    for (size_t j = 0; j < ds->n_cols; j++) {
        mr_col_stats *o = &out[j];
        memset(o, 0, sizeof *o);
        o->row_count = sh->rows;
        if (part_only && !ds->is_part[j]) continue;
        copy_bounds(ds->types[j], &sh->stats[j], o);
        o->has_null_count = 1;
        o->null_count = sh->stats[j].null_count;
        o->nan_count = sh->stats[j].nan_count;
    }
}

/* ---- plan ---------------------------------------------------------------------------- */

enum { ROLE_OUT = 1, ROLE_FILTER = 2 };

void mr__ds_plan_deinit(mr__ds_plan *p)
{
    mr_expr_free(p->filter);
    mr_free(p->out_cols);
    mr_free(p->out_names);
    mr_free(p->need_cols);
    mr_free(p->fcols);
    mr_free(p->shard_prune);
    memset(p, 0, sizeof *p);
}

mr_status mr__ds_plan_init(mr__ds_plan *p, const mr_dataset *ds, const char *filter, const char *const *columns,
                           size_t n_columns, mr_error *err)
{
    memset(p, 0, sizeof *p);
    p->ds = ds;
    mr_status rc = MR_OK;
    mr_col_stats *st = NULL;
    uint8_t *part_pruned = NULL;
    uint8_t *role = NULL; /* per schema column: ROLE_OUT | ROLE_FILTER, so each test is O(1) */
    size_t n_out = columns ? n_columns : ds->n_cols;
    p->out_cols = mr_calloc(n_out ? n_out : 1, sizeof *p->out_cols);
    p->out_names = mr_calloc(n_out ? n_out : 1, sizeof *p->out_names);
    p->need_cols = mr_calloc(ds->n_cols ? ds->n_cols : 1, sizeof *p->need_cols);
    p->fcols = mr_calloc(ds->n_cols ? ds->n_cols : 1, sizeof *p->fcols);
    p->shard_prune = mr_calloc(ds->n_shards ? ds->n_shards : 1, 1);
    st = mr_calloc(ds->n_cols ? ds->n_cols : 1, sizeof *st);
    part_pruned = mr_calloc(ds->n_partitions ? ds->n_partitions : 1, 1);
    role = mr_calloc(ds->n_cols ? ds->n_cols : 1, 1);
    if (!p->out_cols || !p->out_names || !p->need_cols || !p->fcols || !p->shard_prune || !st || !part_pruned ||
        !role) {
        rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        goto done;
    }
    for (size_t k = 0; k < n_out; k++) {
        ssize_t j = columns ? mr_dataset_col_index(ds, columns[k]) : (ssize_t)k;
        if (j < 0) {
            rc = MR_ERR(err, MR_E_NOT_FOUND, "dataset has no column '%s'", columns[k]);
            mr_error_key(err, columns[k]);
            const char *best = mr_closest(columns[k], (const char *const *)ds->names, ds->n_cols);
            if (best) mr_error_hint(err, "did you mean '%s'?", best);
            goto done;
        }
        if (role[j] & ROLE_OUT) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "column '%s' selected twice", ds->names[j]);
            goto done;
        }
        role[j] |= ROLE_OUT;
        p->out_cols[k] = (size_t)j;
        p->out_names[k] = ds->names[j];
        p->need_cols[p->n_need++] = (size_t)j;
    }
    p->n_out = n_out;
    if (filter && filter[strspn(filter, " \t\r\n")]) {
        rc = mr_expr_parse(filter, strlen(filter), "filter", &p->filter, err);
        if (rc == MR_OK)
            rc = mr_expr_bind(p->filter, (const char *const *)ds->names, ds->types, ds->n_cols, MR_EXPR_FILTER, err);
        if (rc != MR_OK) goto done;
        size_t nf;
        const char *const *fc = mr_expr_columns(p->filter, &nf);
        for (size_t k = 0; k < nf; k++) {
            ssize_t j = mr_dataset_col_index(ds, fc[k]);
            if (j < 0 || (role[j] & ROLE_FILTER)) continue;
            p->fcols[p->n_fcols++] = (size_t)j;
            if (!(role[j] & ROLE_OUT)) p->need_cols[p->n_need++] = (size_t)j;
            role[j] |= ROLE_FILTER;
        }
    }
    /* steps 1 and 2 */
    mr_dataset_explain *ex = &p->ex;
    ex->partitions_total = ds->n_partitions;
    ex->shards_total = ds->n_shards;
    ex->rows_total = ds->n_rows;
    for (size_t i = 0; i < ds->n_shards; i++) {
        const mr__ds_shard *sh = &ds->shards[i];
        ex->row_groups_total += sh->row_groups;
        ex->bytes_total += sh->bytes;
        mr_prune pr = MR_PRUNE_SOME;
        if (p->filter && ds->n_part) {
            shard_stats(ds, i, 1, st);
            if (mr_expr_prune(p->filter, st, ds->n_cols) == MR_PRUNE_NONE) {
                p->shard_prune[i] = MR_PRUNE_NONE;
                if (!part_pruned[sh->partition]) ex->partitions_pruned++;
                part_pruned[sh->partition] = 1;
                ex->shards_pruned_partition++;
                ex->row_groups_pruned_shards += sh->row_groups;
                ex->bytes_pruned_partition += sh->bytes;
                continue;
            }
        }
        if (p->filter) {
            shard_stats(ds, i, 0, st);
            pr = mr_expr_prune(p->filter, st, ds->n_cols);
        } else {
            pr = MR_PRUNE_ALL;
        }
        if (sh->rows == 0) pr = MR_PRUNE_NONE;
        p->shard_prune[i] = (uint8_t)pr;
        if (pr == MR_PRUNE_NONE) {
            ex->shards_pruned_stats++;
            ex->row_groups_pruned_shards += sh->row_groups;
            ex->bytes_pruned_stats += sh->bytes;
        }
    }
done:
    mr_free(st);
    mr_free(part_pruned);
    mr_free(role);
    if (rc != MR_OK) mr__ds_plan_deinit(p);
    return rc;
}

/* ---- shards and row groups --------------------------------------------------------- */

mr_status mr__ds_open_shard(const mr_dataset *ds, size_t i, mr_parquet_file **out, mr_error *err)
{
    const mr__ds_shard *sh = &ds->shards[i];
    mr_status rc = ds->s3 ? mr__s3h_parquet_open(ds->s3, sh->abs_path + ds->s3_key_at, sh->bytes, sh->etag, out, err)
                          : mr_parquet_open_mapped(sh->abs_path, out, err);
    if (rc != MR_OK) return rc;
    mr_parquet_set_verify_checksums(*out, ds->verify_crc);
    if ((uint64_t)mr_parquet_num_rows(*out) != sh->rows ||
        (uint64_t)mr_parquet_num_row_groups(*out) != sh->row_groups) {
        MR_ERR(err, MR_E_CORRUPT, "dataset shard '%s' has %lld rows in %zu row groups, the manifest says %llu in %llu",
               sh->path, (long long)mr_parquet_num_rows(*out), mr_parquet_num_row_groups(*out),
               (unsigned long long)sh->rows, (unsigned long long)sh->row_groups);
        mr_error_at(err, sh->abs_path, 0, 0);
        mr_parquet_close(*out);
        *out = NULL;
        return MR_E_CORRUPT;
    }
    return MR_OK;
}

static void pq_to_stats(mr_dtype t, const mr_parquet_stats *ps, mr_col_stats *o)
{
    if (ps->has_null_count) {
        o->has_null_count = 1;
        o->null_count = (uint64_t)ps->null_count;
    }
    if (!ps->has_min_max) return;
    switch (t) {
    case MR_T_BOOL:
        if (ps->kind != MR_PQ_STAT_INT) return;
        o->min.b = (int)ps->min_i;
        o->max.b = (int)ps->max_i;
        break;
    case MR_T_INT64:
    case MR_T_DATE:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: /* unscaled */
        if (ps->kind != MR_PQ_STAT_INT) return;
        o->min.i = ps->min_i;
        o->max.i = ps->max_i;
        break;
    case MR_T_FLOAT64:
    case MR_T_FLOAT32:
        if (ps->kind != MR_PQ_STAT_DOUBLE) return;
        o->min.f = ps->min_d;
        o->max.f = ps->max_d;
        break;
    case MR_T_STRING:
        if (ps->kind != MR_PQ_STAT_STRING) return;
        o->min.s.ptr = ps->min_s;
        o->min.s.len = ps->min_len;
        o->max.s.ptr = ps->max_s;
        o->max.s.len = ps->max_len;
        break;
    default: return;
    }
    o->has_min_max = 1;
}

mr_prune mr__ds_rg_prune(const mr__ds_plan *p, size_t shard, mr_parquet_file *pf, size_t rg, uint64_t *rg_bytes)
{
    const mr_dataset *ds = p->ds;
    if (rg_bytes) {
        uint64_t b = 0;
        for (size_t c = 0; c < mr_parquet_num_columns(pf); c++) {
            int64_t cb = mr_parquet_chunk_bytes(pf, rg, c);
            if (cb > 0) b += (uint64_t)cb;
        }
        *rg_bytes = b;
    }
    mr_prune sp = (mr_prune)p->shard_prune[shard];
    uint64_t rows = (uint64_t)mr_parquet_row_group_rows(pf, rg);
    if (rows == 0) return MR_PRUNE_NONE;
    if (sp != MR_PRUNE_SOME || !p->filter) return sp;
    mr_col_stats stack[32];
    mr_col_stats *st = ds->n_cols <= 32 ? stack : mr_calloc(ds->n_cols, sizeof *st);
    if (!st) return MR_PRUNE_SOME;
    const mr__ds_shard *sh = &ds->shards[shard];
    for (size_t j = 0; j < ds->n_cols; j++) {
        memset(&st[j], 0, sizeof st[j]);
        st[j].row_count = rows;
    }
    for (size_t k = 0; k < p->n_fcols; k++) {
        size_t j = p->fcols[k];
        mr_col_stats *o = &st[j];
        if (ds->is_part[j]) {
            copy_bounds(ds->types[j], &sh->stats[j], o);
            o->has_null_count = 1;
            o->null_count = sh->stats[j].null_count ? rows : 0;
            o->nan_count = sh->stats[j].nan_count ? rows : 0;
            continue;
        }
        /* NaN counts are not in Parquet statistics: the shard's count bounds every row group's */
        o->nan_count = sh->stats[j].nan_count;
        ssize_t leaf = mr_parquet_column_index(pf, ds->names[j]);
        mr_parquet_stats ps;
        if (leaf < 0 || mr_parquet_column_stats(pf, rg, (size_t)leaf, &ps, NULL) != MR_OK) continue;
        pq_to_stats(ds->types[j], &ps, o);
    }
    mr_prune r = mr_expr_prune(p->filter, st, ds->n_cols);
    if (st != stack) mr_free(st);
    return r;
}

mr_status mr__ds_const_column(const mr_dataset *ds, size_t shard, size_t j, size_t n, mr_column **out, mr_error *err)
{
    const mr_dataset_col_stats *v = &ds->shards[shard].stats[j];
    int is_null = !v->has_min_max && v->nan_count == 0;
    mr_dtype t = ds->types[j];
    mr_column *c = NULL;
    mr_status rc;
    *out = NULL;
    if (t == MR_T_STRING && !is_null) {
        mr_column *dict = NULL;
        rc = mr_column_new(ds->names[j], MR_T_STRING, 1, &dict, err);
        if (rc != MR_OK) return rc;
        if (mr_column_append_str(dict, v->min.s.ptr, v->min.s.len) != MR_OK) {
            mr_column_free(dict);
            return MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
        rc = mr_column_new_dict(ds->names[j], dict, n, &c, err);
    } else {
        rc = mr_column_new(ds->names[j], t, n, &c, err);
    }
    if (rc != MR_OK) return rc;
    c->kind = ds->kinds[j];
    rc = mr_column_reserve(c, n);
    for (size_t i = 0; rc == MR_OK && i < n; i++) {
        if (is_null) {
            rc = mr_column_append_null(c);
            continue;
        }
        switch (t) {
        case MR_T_BOOL: rc = mr_column_append_bool(c, v->min.b); break;
        case MR_T_INT64:
        case MR_T_TIMESTAMP:
        case MR_T_DECIMAL: rc = mr_column_append_int64(c, v->min.i); break;
        case MR_T_DATE: rc = mr_column_append_int32(c, (int32_t)v->min.i); break;
        case MR_T_FLOAT64: rc = mr_column_append_float64(c, v->has_min_max ? v->min.f : NAN); break;
        case MR_T_FLOAT32: rc = mr_column_append_float32(c, (float)(v->has_min_max ? v->min.f : NAN)); break;
        case MR_T_STRING: rc = mr_column_append_code(c, 0); break;
        default: rc = MR_E_INTERNAL; break;
        }
    }
    if (rc != MR_OK) {
        mr_column_free(c);
        return MR_ERR(err, rc, "out of memory building partition column '%s'", ds->names[j]);
    }
    *out = c;
    return MR_OK;
}

mr_status mr__ds_read_block(const mr__ds_plan *p, size_t shard, mr_parquet_file *pf, size_t rg, mr_prune prune,
                            int count_only, mr_table **out, uint64_t *n_selected, mr_error *err)
{
    const mr_dataset *ds = p->ds;
    const mr__ds_shard *sh = &ds->shards[shard];
    const size_t *cols = count_only ? p->fcols : p->need_cols;
    size_t n_cols = count_only ? p->n_fcols : p->n_need;
    size_t n = (size_t)mr_parquet_row_group_rows(pf, rg);
    size_t *leaves = mr_calloc(n_cols ? n_cols : 1, sizeof *leaves);
    mr_table *raw = NULL, *t = NULL, *sel = NULL;
    uint8_t *mask = NULL;
    uint32_t *idx = NULL;
    size_t n_leaves = 0;
    mr_status rc = MR_OK;
    if (out) *out = NULL;
    *n_selected = 0;
    if (!leaves) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (count_only && (!p->filter || prune == MR_PRUNE_ALL)) {
        *n_selected = n;
        goto done;
    }
    for (size_t k = 0; k < n_cols; k++) {
        size_t j = cols[k];
        if (ds->is_part[j]) continue;
        ssize_t leaf = mr_parquet_column_index(pf, ds->names[j]);
        const mr_parquet_column_info *ci = leaf >= 0 ? mr_parquet_column(pf, (size_t)leaf) : NULL;
        if (!ci || ci->dtype != ds->types[j]) {
            MR_ERR(err, MR_E_CORRUPT, "dataset shard '%s' %s column '%s' (%s)", sh->path,
                   ci ? "has the wrong type for" : "lacks", ds->names[j], mr_dtype_name(ds->types[j]));
            mr_error_at(err, sh->abs_path, 0, 0);
            rc = MR_E_CORRUPT;
            goto done;
        }
        leaves[n_leaves++] = (size_t)leaf;
    }
    if (n_leaves) {
        rc = mr_parquet_read_row_group(pf, rg, leaves, n_leaves, &raw, err);
        if (rc != MR_OK) goto done;
    }
    rc = mr_table_new(&t, err);
    if (rc != MR_OK) goto done;
    for (size_t k = 0, f = 0; k < n_cols; k++) {
        size_t j = cols[k];
        mr_column *c = NULL;
        if (ds->is_part[j]) {
            rc = mr__ds_const_column(ds, shard, j, n, &c, err);
            if (rc != MR_OK) goto done;
        } else {
            c = raw->cols[f];
            raw->cols[f++] = NULL;
        }
        rc = mr_table_add_column(t, c, err);
        if (rc != MR_OK) goto done;
    }
    t->n_rows = n;
    size_t n_sel = n;
    if (p->filter && prune != MR_PRUNE_ALL) {
        mask = mr_malloc(n ? n : 1);
        if (!mask) {
            rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
            goto done;
        }
        rc = mr_expr_eval_filter(p->filter, t, mask, err);
        if (rc != MR_OK) goto done;
        n_sel = 0;
        for (size_t i = 0; i < n; i++) n_sel += mask[i];
        if (!count_only && n_sel < n) {
            idx = mr_malloc(n_sel ? n_sel * sizeof *idx : 1);
            if (!idx) {
                rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
                goto done;
            }
            for (size_t i = 0, q = 0; i < n; i++)
                if (mask[i]) idx[q++] = (uint32_t)i;
            rc = mr_table_take(t, idx, n_sel, &sel, err);
            if (rc != MR_OK) goto done;
            mr_table_free(t);
            t = sel;
            sel = NULL;
        }
    }
    *n_selected = n_sel;
    if (count_only) goto done;
    rc = mr_table_project(t, (const char *const *)p->out_names, p->n_out, err);
    if (rc != MR_OK) goto done;
    t->n_rows = n_sel;
    *out = t;
    t = NULL;
done:
    if (rc != MR_OK && err && !err->file[0]) mr_error_at(err, sh->abs_path, 0, 0);
    mr_free(leaves);
    mr_free(mask);
    mr_free(idx);
    mr_table_free(raw);
    mr_table_free(t);
    mr_table_free(sel);
    return rc;
}

/* ---- scan ---------------------------------------------------------------------------- */

struct mr_dataset_scan {
    mr__ds_plan plan;
    size_t shard;             /* current shard */
    size_t rg;                /* next row group in it */
    mr_parquet_file *pf;      /* open file of the current shard, or NULL */
    uint64_t closed_bytes;    /* bytes read from files already closed */
    mr_status sticky;
};

mr_status mr_dataset_scan_open(const mr_dataset *ds, const char *filter, const char *const *columns, size_t n_columns,
                               mr_dataset_scan **out, mr_error *err)
{
    *out = NULL;
    mr_dataset_scan *s = mr_calloc(1, sizeof *s);
    if (!s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = mr__ds_plan_init(&s->plan, ds, filter, columns, n_columns, err);
    if (rc != MR_OK) {
        mr_free(s);
        return rc;
    }
    *out = s;
    return MR_OK;
}

void mr_dataset_scan_only_shards(mr_dataset_scan *s, size_t lo, size_t hi)
{
    for (size_t i = 0; i < s->plan.ds->n_shards; i++)
        if (i < lo || i >= hi) s->plan.shard_prune[i] = MR_PRUNE_NONE;
}

void mr_dataset_scan_close(mr_dataset_scan *s)
{
    if (!s) return;
    mr_parquet_close(s->pf);
    mr__ds_plan_deinit(&s->plan);
    mr_free(s);
}

static void close_file(mr_dataset_scan *s)
{
    if (!s->pf) return;
    s->closed_bytes += mr_parquet_bytes_read(s->pf);
    mr_parquet_close(s->pf);
    s->pf = NULL;
}

mr_status mr_dataset_scan_next(mr_dataset_scan *s, mr_table **out, mr_error *err)
{
    *out = NULL;
    if (s->sticky != MR_OK) return MR_ERR(err, MR_E_STATE, "dataset scan: an earlier read failed");
    const mr_dataset *ds = s->plan.ds;
    mr_dataset_explain *ex = &s->plan.ex;
    mr_status rc = MR_OK;
    while (s->shard < ds->n_shards) {
        if (s->plan.shard_prune[s->shard] == MR_PRUNE_NONE) {
            s->shard++;
            continue;
        }
        if (!s->pf) {
            rc = mr__ds_open_shard(ds, s->shard, &s->pf, err);
            if (rc != MR_OK) break;
            s->rg = 0;
        }
        if (s->rg >= mr_parquet_num_row_groups(s->pf)) {
            close_file(s);
            s->shard++;
            continue;
        }
        size_t rg = s->rg++;
        uint64_t rg_bytes = 0;
        mr_prune pr = mr__ds_rg_prune(&s->plan, s->shard, s->pf, rg, &rg_bytes);
        if (pr == MR_PRUNE_NONE) {
            ex->row_groups_pruned_stats++;
            ex->bytes_pruned_row_groups += rg_bytes;
            continue;
        }
        uint64_t n_sel = 0;
        mr_table *t = NULL;
        rc = mr__ds_read_block(&s->plan, s->shard, s->pf, rg, pr, 0, &t, &n_sel, err);
        if (rc != MR_OK) break;
        ex->row_groups_read++;
        ex->rows_scanned += (uint64_t)mr_parquet_row_group_rows(s->pf, rg);
        ex->rows_selected += n_sel;
        if (t->n_rows == 0) {
            mr_table_free(t);
            continue;
        }
        *out = t;
        return MR_OK;
    }
    if (rc != MR_OK) {
        s->sticky = rc;
        close_file(s);
    }
    return rc;
}

void mr_dataset_scan_explain(const mr_dataset_scan *s, mr_dataset_explain *out)
{
    *out = s->plan.ex;
    out->bytes_read = s->closed_bytes + (s->pf ? mr_parquet_bytes_read(s->pf) : 0);
    mr__s3h_totals(s->plan.ds->s3, &out->requests, &out->request_bytes);
}

mr_status mr_dataset_explain_format(const mr_dataset_explain *e, mr_buf *b)
{
    unsigned long long sh_read = e->shards_total - e->shards_pruned_partition - e->shards_pruned_stats;
    return mr_buf_printf(
        b,
        "partitions: %llu of %llu kept (%llu pruned by partition values)\n"
        "shards:     %llu of %llu kept (%llu pruned by partition, %llu by manifest statistics)\n"
        "row groups: %llu of %llu read (%llu in pruned shards, %llu pruned by row-group statistics)\n"
        "rows:       %llu scanned, %llu selected (dataset has %llu)\n"
        "bytes:      %llu read of %llu (skipped: %llu by partition, %llu by shard statistics, %llu by row-group "
        "statistics)\n",
        (unsigned long long)(e->partitions_total - e->partitions_pruned), (unsigned long long)e->partitions_total,
        (unsigned long long)e->partitions_pruned, sh_read, (unsigned long long)e->shards_total,
        (unsigned long long)e->shards_pruned_partition, (unsigned long long)e->shards_pruned_stats,
        (unsigned long long)e->row_groups_read, (unsigned long long)e->row_groups_total,
        (unsigned long long)e->row_groups_pruned_shards, (unsigned long long)e->row_groups_pruned_stats,
        (unsigned long long)e->rows_scanned, (unsigned long long)e->rows_selected, (unsigned long long)e->rows_total,
        (unsigned long long)e->bytes_read, (unsigned long long)e->bytes_total,
        (unsigned long long)e->bytes_pruned_partition, (unsigned long long)e->bytes_pruned_stats,
        (unsigned long long)e->bytes_pruned_row_groups);
}

mr_status mr_dataset_explain_json(const mr_dataset_explain *e, mr_buf *b)
{
#define F(x) #x, (unsigned long long)e->x
    return mr_buf_printf(b,
                         "{\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,"
                         "\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,"
                         "\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu,\"%s\":%llu}",
                         F(partitions_total), F(partitions_pruned), F(shards_total), F(shards_pruned_partition),
                         F(shards_pruned_stats), F(row_groups_total), F(row_groups_pruned_shards),
                         F(row_groups_pruned_stats), F(row_groups_read), F(rows_total), F(rows_scanned),
                         F(rows_selected), F(bytes_total), F(bytes_pruned_partition), F(bytes_pruned_stats),
                         F(bytes_pruned_row_groups), F(bytes_read), F(requests), F(request_bytes));
#undef F
}

/* An empty table with the scan's output columns. */
static mr_status empty_table(const mr__ds_plan *p, mr_table **out, mr_error *err)
{
    mr_table *t = NULL;
    mr_status rc = mr_table_new(&t, err);
    for (size_t k = 0; rc == MR_OK && k < p->n_out; k++) {
        mr_column *c = NULL;
        rc = mr_column_new(p->out_names[k], p->ds->types[p->out_cols[k]], 0, &c, err);
        if (rc == MR_OK) c->kind = p->ds->kinds[p->out_cols[k]];
        if (rc == MR_OK) rc = mr_table_add_column(t, c, err);
    }
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    *out = t;
    return MR_OK;
}

mr_status mr_dataset_read_all(const char *dir, const char *filter, const char *const *columns, size_t n_columns,
                              mr_table **out, mr_dataset_explain *explain, mr_error *err)
{
    mr_dataset *ds = NULL;
    mr_dataset_scan *s = NULL;
    mr_table *all = NULL, *b = NULL;
    *out = NULL;
    mr_status rc = mr_dataset_open(dir, &ds, err);
    if (rc == MR_OK) rc = mr_dataset_scan_open(ds, filter, columns, n_columns, &s, err);
    if (rc == MR_OK) rc = empty_table(&s->plan, &all, err);
    while (rc == MR_OK) {
        rc = mr_dataset_scan_next(s, &b, err);
        if (rc != MR_OK || !b) break;
        for (size_t k = 0; k < b->n_cols; k++) /* unify dictionaries: plain strings */
            if (rc == MR_OK) rc = mr_column_materialize(b->cols[k], err);
        if (rc == MR_OK) rc = mr_table_append(all, b, err);
        mr_table_free(b);
        b = NULL;
    }
    if (rc == MR_OK && explain) mr_dataset_scan_explain(s, explain);
    mr_dataset_scan_close(s);
    mr_dataset_close(ds);
    if (rc != MR_OK) {
        mr_table_free(all);
        return rc;
    }
    *out = all;
    return MR_OK;
}
