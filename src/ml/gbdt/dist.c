/* Collectives of data-parallel training, built on one transport call
 * (mr_gbdt_comm.exchange: post transfers, wait for all with a deadline).
 *
 * Every collective is a direct exchange: each rank sends its part to every
 * other rank and receives theirs. For the histogram reduce-scatter that is
 * the least volume there is, (p - 1) / p of a histogram sent per rank; the
 * cost is p - 1 messages per rank, which is what bounds it at large p
 * (docs/cluster.md works the numbers). Every reduction is over integers,
 * or a maximum, or is done after gathering, in rank order: nothing depends
 * on the arrival order or on the rank count. */
#include "gbdt_int.h"

#include <stdio.h>
#include <stdlib.h>

#define DIST_DEFAULT_TIMEOUT_S 600.0

mr_status mr__dist_exchange(mr__dist *D, mr_gbdt_xfer *x, size_t n, const char *what, mr_error *err)
{
    if (n == 0) return MR_OK;
    double to = D->c->timeout_s > 0 ? D->c->timeout_s : DIST_DEFAULT_TIMEOUT_S;
    int peer = -1;
    mr_status st = D->c->exchange(D->c->ctx, x, n, to, &peer);
    if (st == MR_OK) return MR_OK;
    char when[48] = "";
    if (D->iter >= 0) snprintf(when, sizeof(when), ", iteration %d", D->iter);
    if (st == MR_E_TIMEOUT) {
        MR_ERR(err, MR_E_TIMEOUT, "rank %d: no answer from rank %d within %g s (%s%s)", D->rank, peer, to, what, when);
        mr_error_hint(err, "rank %d died, hangs or is far slower than the others; raise the timeout if it is only slow", peer);
        return MR_E_TIMEOUT;
    }
    return MR_ERR(err, st, "rank %d: the exchange with rank %d failed (%s%s)", D->rank, peer, what, when);
}

/* Slices of the features, one per rank, balanced by histogram bins. */
static void feature_slices(mr__dist *D, const mr_gbdt_data *d)
{
    const size_t F = d->n_features, total = d->bin_offset[F];
    size_t f = 0;
    D->fb[0] = 0;
    for (int r = 1; r < D->size; r++) {
        size_t want = total * (size_t)r / (size_t)D->size;
        while (f < F && d->bin_offset[f] < want) f++;
        D->fb[r] = (uint32_t)f;
    }
    D->fb[D->size] = (uint32_t)F;
}

mr_status mr__dist_begin(mr__dist *D, const mr_gbdt_comm *c, mr_error *err)
{
    memset(D, 0, sizeof(*D));
    D->c = c;
    D->rank = c->rank;
    D->size = c->size;
    D->iter = -1;
    if (c->size < 1 || c->rank < 0 || c->rank >= c->size || !c->exchange)
        return MR_ERR(err, MR_E_INVALID_ARG, "rank %d of %d: not a valid communicator", c->rank, c->size);
    if (!(D->x = mr_calloc(2 * (size_t)c->size, sizeof(mr_gbdt_xfer)))) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    return MR_OK;
}

mr_status mr__dist_init(mr__dist *D, const mr_gbdt_comm *c, const mr_gbdt_data *d, mr_error *err)
{
    mr_status st0 = mr__dist_begin(D, c, err);
    if (st0 != MR_OK) return st0;
    const size_t p = (size_t)c->size;
    D->rows_of = mr_calloc(p, sizeof(int64_t));
    D->row_lo_of = mr_calloc(p + 1, sizeof(size_t));
    D->fb = mr_calloc(p + 1, sizeof(uint32_t));
    if (!D->rows_of || !D->row_lo_of || !D->fb) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    /* Every rank learns every share's size, and checks the widths agree. */
    int64_t mine[2] = {(int64_t)d->n_rows, (int64_t)d->bin_offset[d->n_features]};
    int64_t *all = mr_calloc(2 * p, sizeof(int64_t));
    if (!all) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status st = mr__dist_allgather(D, mine, sizeof(mine), all, "the share sizes", err);
    for (size_t r = 0; st == MR_OK && r < p; r++) {
        if (all[2 * r + 1] != mine[1]) {
            st = MR_ERR(err, MR_E_SCHEMA, "rank %d has %lld histogram bins, rank %zu %lld: the ranks binned differently",
                        D->rank, (long long)mine[1], r, (long long)all[2 * r + 1]);
            break;
        }
        D->rows_of[r] = all[2 * r];
        D->row_lo_of[r + 1] = D->row_lo_of[r] + (size_t)all[2 * r];
    }
    mr_free(all);
    if (st != MR_OK) return st;
    D->n_total = D->row_lo_of[p];
    D->row_lo = D->row_lo_of[D->rank];
    feature_slices(D, d);
    size_t mine_bins = d->bin_offset[D->fb[D->rank + 1]] - d->bin_offset[D->fb[D->rank]];
    mr_log(MR_LOG_DEBUG, "gbdt: rank %d owns features %u..%u (%zu of %u histogram bins)", D->rank, D->fb[D->rank],
           D->fb[D->rank + 1], mine_bins, d->bin_offset[d->n_features]);
    D->rs_buf = mr_malloc(((p - 1) * mine_bins + 1) * sizeof(mr__hbin));
    if (!D->rs_buf) return MR_ERR(err, MR_E_NOMEM, "out of memory for the histogram exchange");
    return MR_OK;
}

void mr__dist_free(mr__dist *D)
{
    if (!D) return;
    mr_free(D->rows_of);
    mr_free(D->row_lo_of);
    mr_free(D->fb);
    mr_free(D->x);
    mr_free(D->rs_buf);
    memset(D, 0, sizeof(*D));
}

mr_status mr__dist_allgatherv(mr__dist *D, const void *mine, const size_t *lens, void *all, const char *what,
                              mr_error *err)
{
    size_t n = 0, off = 0;
    for (int q = 0; q < D->size; q++) {
        char *dst = (char *)all + off;
        off += lens[q];
        if (q == D->rank) {
            if (lens[q]) memcpy(dst, mine, lens[q]);
            continue;
        }
        if (lens[D->rank]) D->x[n++] = (mr_gbdt_xfer){.peer = q, .send = 1, .buf = (void *)mine, .len = lens[D->rank]};
        if (lens[q]) D->x[n++] = (mr_gbdt_xfer){.peer = q, .send = 0, .buf = dst, .len = lens[q]};
    }
    return mr__dist_exchange(D, D->x, n, what, err);
}

mr_status mr__dist_allgather(mr__dist *D, const void *mine, size_t len, void *all, const char *what, mr_error *err)
{
    size_t n = 0;
    for (int q = 0; q < D->size; q++) {
        char *dst = (char *)all + (size_t)q * len;
        if (q == D->rank) {
            memcpy(dst, mine, len);
            continue;
        }
        D->x[n++] = (mr_gbdt_xfer){.peer = q, .send = 1, .buf = (void *)mine, .len = len};
        D->x[n++] = (mr_gbdt_xfer){.peer = q, .send = 0, .buf = dst, .len = len};
    }
    return mr__dist_exchange(D, D->x, n, what, err);
}

mr_status mr__dist_allreduce_i64(mr__dist *D, int64_t *v, int n, int op, const char *what, mr_error *err)
{
    if (D->size == 1) return MR_OK;
    int64_t stackbuf[64];
    size_t need = (size_t)n * (size_t)D->size;
    int64_t *all = need <= 64 ? stackbuf : mr_malloc(need * sizeof(int64_t));
    if (!all) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status st = mr__dist_allgather(D, v, (size_t)n * sizeof(int64_t), all, what, err);
    for (int k = 0; st == MR_OK && k < n; k++) {
        int64_t acc = all[k];
        for (int q = 1; q < D->size; q++) {
            int64_t x = all[(size_t)q * (size_t)n + (size_t)k];
            if (op == MR__DIST_SUM)
                acc += x;
            else if (op == MR__DIST_MAX)
                acc = x > acc ? x : acc;
            else
                acc = x < acc ? x : acc;
        }
        v[k] = acc;
    }
    if (all != stackbuf) mr_free(all);
    return st;
}

void mr__dist_slice(const mr__dist *D, const mr_gbdt_data *d, size_t *bin_lo, size_t *bin_hi)
{
    *bin_lo = d->bin_offset[D->fb[D->rank]];
    *bin_hi = d->bin_offset[D->fb[D->rank + 1]];
}

mr_status mr__dist_reduce_scatter_hist(mr__dist *D, const mr_gbdt_data *d, mr__hbin *hist, const char *what,
                                       mr_error *err)
{
    if (D->size == 1) return MR_OK;
    size_t lo, hi, n = 0, k = 0;
    mr__dist_slice(D, d, &lo, &hi);
    const size_t mine = hi - lo;
    for (int q = 0; q < D->size; q++) {
        if (q == D->rank) continue;
        size_t qlo = d->bin_offset[D->fb[q]], qhi = d->bin_offset[D->fb[q + 1]];
        if (qhi > qlo)
            D->x[n++] = (mr_gbdt_xfer){.peer = q, .send = 1, .buf = hist + qlo, .len = (qhi - qlo) * sizeof(mr__hbin)};
        if (mine)
            D->x[n++] = (mr_gbdt_xfer){.peer = q, .send = 0, .buf = D->rs_buf + k * mine, .len = mine * sizeof(mr__hbin)};
        k++;
    }
    mr_status st = mr__dist_exchange(D, D->x, n, what, err);
    if (st != MR_OK) return st;
    for (size_t j = 0; j < k; j++) {
        const mr__hbin *src = D->rs_buf + j * mine;
        mr__hbin *dst = hist + lo;
        for (size_t b = 0; b < mine; b++) {
            dst[b].g += src[b].g;
            dst[b].hc += src[b].hc; /* k counts all ranks' rows: no carry */
        }
    }
    D->hist_bytes += (uint64_t)((d->bin_offset[d->n_features] - mine) * sizeof(mr__hbin));
    return MR_OK;
}

mr_status mr__dist_best_splits(mr__dist *D, mr__split *best, int n, const char *what, mr_error *err)
{
    if (D->size == 1 || n == 0) return MR_OK;
    mr__split stackbuf[32];
    size_t need = (size_t)D->size * (size_t)n;
    mr__split *all = need <= 32 ? stackbuf : mr_malloc(need * sizeof(mr__split));
    if (!all) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status st = mr__dist_allgather(D, best, (size_t)n * sizeof(*best), all, what, err);
    for (int k = 0; st == MR_OK && k < n; k++) {
        /* slices ascend by feature: the first strictly larger gain is the
         * one a single process would keep (ties go to the lower feature) */
        const mr__split *w = NULL;
        for (int q = 0; q < D->size; q++) {
            const mr__split *c = &all[(size_t)q * (size_t)n + (size_t)k];
            if (c->feature >= 0 && (!w || c->gain > w->gain)) w = c;
        }
        if (w) {
            best[k] = *w;
        } else {
            best[k].feature = -1;
            best[k].gain = -INFINITY;
        }
    }
    if (all != stackbuf) mr_free(all);
    return st;
}
