#define _GNU_SOURCE /* SCHED_BATCH */
/* The dataset loader: deterministic (seed, epoch) order, block shuffle plus a
 * bounded shuffle buffer, parallel decoding ahead of the consumer, resume at
 * (epoch, batch).
 *
 * How the order stays a pure function of (seed, epoch) whatever the threads
 * do. Everything that decides the order runs in one thread, the assembler,
 * and works on row *references* (block, row-within-the-block's-selected-rows)
 * rather than on data:
 *   - the block permutation and every shuffle-buffer pick come from one
 *     xoshiro256** stream seeded by splitmix64 from (seed, epoch);
 *   - the only fact about the data the order needs is how many rows each
 *     block selects. Without a filter (or when pruning proved every row of a
 *     block matches) that is the row group's row count from the footer;
 *     otherwise the block must be decoded (or, when resuming, its filter
 *     columns evaluated) first — but the count is the same whoever computes it.
 * Worker threads only decode blocks into immutable tables; the assembler
 * waits for a block's table when it emits one of its rows, then gathers the
 * referenced values into a batch and queues it (bounded) for the consumer.
 *
 * Resume: replaying the sequence up to batch k needs only the references, so
 * the assembler runs the same algorithm without data for k * batch_size rows.
 * Blocks whose rows are all emitted in the replay are never decoded (their
 * counts come from the footer, or from decoding only the filter's columns).
 *
 * Bounds: decoding may run `lookahead` blocks past the furthest block the
 * assembler has touched (entered into the buffer or asked for); a block's
 * table is freed as soon as its last row is emitted. Memory is thus the
 * shuffle buffer's blocks plus the lookahead plus prefetch_batches batches.
 * Shutdown: close sets `stop`, wakes every wait, and joins the threads. */
#include "data/dataset_int.h"
#include "millrace/loader.h"

#include <pthread.h>
#include <sched.h>
#include <string.h>

#define DEFAULT_BATCH 1024
#define DEFAULT_SHUFFLE_BUFFER 65536
#define DEFAULT_PREFETCH 4
#define MAX_THREADS 64

/* ---- PRNG: core's xoshiro256**, seeded from (seed, epoch) --------------------------------- */

static void rng_seed(mr_rng *r, uint64_t seed, uint64_t epoch)
{
    uint64_t x = seed;
    mr_rng_seed(r, mr_splitmix64(&x) ^ (epoch * 0xd1342543de82ef95ULL + 0x2545f4914f6cdd1dULL));
}

/* ---- state ------------------------------------------------------------------------------ */

enum { B_IDLE = 0, B_DECODING = 1, B_READY = 2, B_FREED = 3 };

typedef struct block {
    size_t shard, rg;
    mr_prune prune;
    int64_t count;        /* selected rows, -1 until known */
    uint64_t remaining;   /* rows not yet emitted (valid once count is known) */
    int state;
    mr_table *t;          /* B_READY: the block's selected rows, output columns */
    size_t qidx;          /* position in the decode queue, SIZE_MAX if never decoded */
} block;

typedef uint64_t ref; /* block << 32 | row */

/* A batch's images are decoded in chunks of CHUNK_IMAGES, each claimed under the mutex by a
 * worker or by the consumer itself: a consumer that finds the head batch not ready decodes its
 * unclaimed chunks instead of sleeping, so a worker the scheduler parked (a training loop's
 * threads busy on every core) does not stall it. */
#define CHUNK_IMAGES 8
enum { S_READY = 0, S_RAW = 1, S_DECODING = 2 };
typedef struct slot {
    int state;            /* S_RAW: no chunk claimed yet; S_DECODING: some claimed */
    uint64_t first;       /* position of its first row in the epoch's sequence */
    uint32_t *shard;      /* per row: the shard it came from (UINT32_MAX: padding) */
    mr_column *col;       /* S_DECODING: the samples being written, back to back */
    size_t next_i, done_n; /* S_DECODING: first unclaimed image; images finished */
} slot;
#define REF(b, r) (((uint64_t)(b) << 32) | (uint64_t)(r))
#define REF_BLOCK(x) ((size_t)((x) >> 32))
#define REF_ROW(x) ((size_t)((x)&0xffffffffu))

struct mr_loader {
    mr_dataset *ds;
    mr__ds_plan plan;
    mr_parquet_file **files;    /* per shard, opened at plan time (thread-safe reads) */
    block *blocks;
    size_t n_blocks;
    size_t *order;              /* block order of the epoch */
    size_t batch_size, buf_cap, prefetch, lookahead;
    int shuffle, drop_last, n_threads;
    uint64_t start_batch;
    uint64_t rank_begin, rank_len; /* this rank's rows of the sequence (rank_len UINT64_MAX: all) */
    const char *decode_col;     /* borrowed from ds (its name) or NULL */
    mr_image_opts img;
    int skip_bad_images;
    uint64_t seed, epoch;
    double decode_s;            /* under mu */
    uint64_t n_images, n_bad_images;
    mr_table *pad;              /* the rows after the sequence's end that pad this rank's slice */
    uint64_t first_pad;         /* the position of pad's first row in the padded sequence */
    mr_rng rng;
    /* assembler-private */
    size_t pos;                 /* index into order of the block being streamed */
    size_t pos_row;
    ref *buf;
    size_t buf_n;
    /* shared, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_block, cv_batch;
    size_t *queue;              /* decode queue: block ids in the order they are needed */
    size_t n_queue, next_q;
    size_t touched_hi;          /* furthest queue index the assembler touched, +1 (0 = none) */
    mr_table **batches;         /* ring of prefetch slots */
    struct slot *slots;         /* per ring slot: its images' state */
    size_t b_head, b_n;
    int done, stop, failed;
    mr_status fail_rc;
    mr_error fail_err;
    uint64_t decoded;
    pthread_t *workers;
    int n_started;
    pthread_t assembler;
    int assembler_started;
    /* consumer */
    double t_open, t_last, wait_s;
    uint64_t n_batches, n_rows;
};

void mr_loader_opts_init(mr_loader_opts *o)
{
    memset(o, 0, sizeof *o);
    o->batch_size = DEFAULT_BATCH;
    o->shuffle_buffer_rows = DEFAULT_SHUFFLE_BUFFER;
    o->prefetch_batches = DEFAULT_PREFETCH;
    mr_image_opts_init(&o->image);
}

static void fail_locked(mr_loader *ld, mr_status rc, const mr_error *e)
{
    if (!ld->failed) {
        ld->failed = 1;
        ld->fail_rc = rc;
        if (e) ld->fail_err = *e;
        else MR_ERR(&ld->fail_err, rc, "loader failed");
    }
    pthread_cond_broadcast(&ld->cv_work);
    pthread_cond_broadcast(&ld->cv_block);
    pthread_cond_broadcast(&ld->cv_batch);
}

/* ---- workers ------------------------------------------------------------------------------ */

static mr_status image_column(mr_loader *ld, const mr_table *t, mr_column **out, mr_error *err);
static mr_status decode_range(mr_loader *ld, const mr_table *t, const slot *sl, size_t a, size_t b, uint64_t *bad,
                              mr_error *err);

/* Slot i (a batch in the ring) has images no thread has claimed. Under mu. */
static int unclaimed(const mr_loader *ld, size_t i)
{
    const slot *sl = &ld->slots[i];
    return sl->state == S_RAW || (sl->state == S_DECODING && sl->next_i < ld->batches[i]->n_rows);
}

/* Claims the next chunk of slot i's images and decodes it, unlocking mu meanwhile; the thread
 * that finishes the last chunk puts the samples into the batch and marks it ready. Under mu
 * (held again on return); slot i must have unclaimed images. */
static void decode_chunk_locked(mr_loader *ld, size_t i)
{
    slot *sl = &ld->slots[i];
    mr_table *t = ld->batches[i];
    mr_error e;
    mr_error_init(&e);
    if (sl->state == S_RAW) {
        mr_status rc = image_column(ld, t, &sl->col, &e);
        if (rc != MR_OK) {
            fail_locked(ld, rc, &e);
            return;
        }
        sl->state = S_DECODING;
        sl->next_i = sl->done_n = 0;
    }
    size_t n = t->n_rows, a = sl->next_i, b = a + CHUNK_IMAGES < n ? a + CHUNK_IMAGES : n;
    sl->next_i = b;
    pthread_mutex_unlock(&ld->mu);
    uint64_t bad = 0;
    double t0 = mr_now();
    mr_status rc = decode_range(ld, t, sl, a, b, &bad, &e);
    double dt = mr_now() - t0;
    pthread_mutex_lock(&ld->mu);
    ld->decode_s += dt;
    ld->n_images += b - a;
    ld->n_bad_images += bad;
    if (rc != MR_OK) {
        fail_locked(ld, rc, &e);
        return;
    }
    sl->done_n += b - a;
    if (sl->done_n < n) return;
    ssize_t j = mr_table_column_index(t, ld->decode_col);
    rc = j < 0 ? MR_ERR(&e, MR_E_INTERNAL, "loader: the batch has no column '%s'", ld->decode_col)
               : mr_table_set_column(t, (size_t)j, sl->col, &e);
    if (j < 0) mr_column_free(sl->col);
    sl->col = NULL;
    if (rc != MR_OK) {
        fail_locked(ld, rc, &e);
        return;
    }
    sl->state = S_READY;
    pthread_cond_broadcast(&ld->cv_batch);
}

/* The loader's own threads run as SCHED_BATCH: the same share of the CPU, but a thread woken
 * (a batch taken, a block decoded) never preempts a running one. Without it, every batch the
 * consumer took woke the assembler and a worker onto its core: on a machine whose cores a
 * training step keeps busy, each mr_loader_next lost about a millisecond to them although its
 * batch was ready (the CNN example: 4-9% input-bound, under 1% with it). Unprivileged; a
 * failure changes nothing else. */
static void batch_policy(void)
{
    struct sched_param sp;
    memset(&sp, 0, sizeof sp);
    (void)pthread_setschedparam(pthread_self(), SCHED_BATCH, &sp);
}

static void *worker_main(void *arg)
{
    mr_loader *ld = arg;
    batch_policy();
    pthread_mutex_lock(&ld->mu);
    while (!ld->stop && !ld->failed) {
        size_t raw = SIZE_MAX; /* the oldest batch with images no thread has claimed */
        for (size_t i = 0; ld->decode_col && i < ld->b_n && raw == SIZE_MAX; i++)
            if (unclaimed(ld, (ld->b_head + i) % ld->prefetch)) raw = (ld->b_head + i) % ld->prefetch;
        if (raw != SIZE_MAX) {
            decode_chunk_locked(ld, raw);
            continue;
        }
        if (ld->next_q < ld->n_queue && ld->next_q < ld->touched_hi + ld->lookahead) {
            size_t b = ld->queue[ld->next_q++];
            block *bk = &ld->blocks[b];
            bk->state = B_DECODING;
            pthread_mutex_unlock(&ld->mu);
            mr_error e;
            mr_error_init(&e);
            mr_table *t = NULL;
            uint64_t n_sel = 0;
            mr_status rc = mr__ds_read_block(&ld->plan, bk->shard, ld->files[bk->shard], bk->rg, bk->prune, 0, &t,
                                             &n_sel, &e);
            pthread_mutex_lock(&ld->mu);
            if (rc != MR_OK) {
                fail_locked(ld, rc, &e);
                break;
            }
            if (bk->count >= 0 && (uint64_t)bk->count != n_sel) {
                mr_table_free(t);
                mr_error_clear(&e);
                MR_ERR(&e, MR_E_INTERNAL, "loader: block selected %llu rows, expected %lld", (unsigned long long)n_sel,
                       (long long)bk->count);
                fail_locked(ld, MR_E_INTERNAL, &e);
                break;
            }
            bk->t = t;
            bk->state = B_READY;
            ld->decoded++;
            pthread_cond_broadcast(&ld->cv_block);
            continue;
        }
        pthread_cond_wait(&ld->cv_work, &ld->mu);
    }
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

/* ---- assembler ------------------------------------------------------------------------------ */

static void touch(mr_loader *ld, size_t b)
{
    size_t q = ld->blocks[b].qidx;
    if (q == SIZE_MAX) return;
    pthread_mutex_lock(&ld->mu);
    if (q + 1 > ld->touched_hi) {
        ld->touched_hi = q + 1;
        pthread_cond_broadcast(&ld->cv_work);
    }
    pthread_mutex_unlock(&ld->mu);
}

/* Waits until block b is decoded. Returns 0, or -1 when stopping/failed. */
static int wait_block(mr_loader *ld, size_t b)
{
    touch(ld, b);
    pthread_mutex_lock(&ld->mu);
    while (ld->blocks[b].state != B_READY && !ld->stop && !ld->failed) pthread_cond_wait(&ld->cv_block, &ld->mu);
    int ok = ld->blocks[b].state == B_READY;
    pthread_mutex_unlock(&ld->mu);
    return ok ? 0 : -1;
}

/* Selected-row count of block b. live: wait for the workers' decode;
 * replay: compute it here from the filter's columns only. */
static mr_status block_count(mr_loader *ld, size_t b, int live, mr_error *err)
{
    block *bk = &ld->blocks[b];
    if (bk->count >= 0) return MR_OK;
    if (live) {
        if (wait_block(ld, b)) return MR_E_INTERRUPTED;
        bk->count = (int64_t)bk->t->n_rows;
        if (bk->count == 0) {
            pthread_mutex_lock(&ld->mu);
            mr_table_free(bk->t);
            bk->t = NULL;
            bk->state = B_FREED;
            pthread_mutex_unlock(&ld->mu);
        }
    } else {
        uint64_t n = 0;
        mr_status rc = mr__ds_read_block(&ld->plan, bk->shard, ld->files[bk->shard], bk->rg, bk->prune, 1, NULL, &n, err);
        if (rc != MR_OK) return rc;
        bk->count = (int64_t)n;
    }
    bk->remaining = (uint64_t)bk->count;
    return MR_OK;
}

/* Next reference of the row stream; *got = 0 at its end. */
static mr_status stream_next(mr_loader *ld, int live, ref *out, int *got, mr_error *err)
{
    *got = 0;
    while (ld->pos < ld->n_blocks) {
        size_t b = ld->order[ld->pos];
        if (live && ld->pos_row == 0) touch(ld, b);
        mr_status rc = block_count(ld, b, live, err);
        if (rc != MR_OK) return rc;
        if (ld->pos_row < (size_t)ld->blocks[b].count) {
            *out = REF(b, ld->pos_row++);
            *got = 1;
            return MR_OK;
        }
        ld->pos++;
        ld->pos_row = 0;
    }
    return MR_OK;
}

/* Next reference of the output sequence (through the shuffle buffer). */
static mr_status emit_next(mr_loader *ld, int live, ref *out, int *got, mr_error *err)
{
    if (!ld->buf) return stream_next(ld, live, out, got, err);
    ref r;
    int g = 1;
    mr_status rc = MR_OK;
    while (ld->buf_n < ld->buf_cap) {
        rc = stream_next(ld, live, &r, &g, err);
        if (rc != MR_OK) return rc;
        if (!g) break;
        ld->buf[ld->buf_n++] = r;
    }
    *got = 0;
    if (ld->buf_n == 0) return MR_OK;
    size_t j = (size_t)mr_rng_below(&ld->rng, ld->buf_n);
    *out = ld->buf[j];
    *got = 1;
    if (g) rc = stream_next(ld, live, &r, &g, err);
    if (rc != MR_OK) return rc;
    if (g) ld->buf[j] = r;
    else ld->buf[j] = ld->buf[--ld->buf_n];
    return MR_OK;
}

/* Row `row` of src appended to dst (same type; dst plain). */
static mr_status append_value(mr_column *dst, const mr_column *src, size_t row)
{
    if (mr_column_is_null(src, row)) return mr_column_append_null(dst);
    switch (src->type) {
    case MR_T_BOOL: return mr_column_append_bool(dst, ((const uint8_t *)src->data)[row]);
    case MR_T_INT64:
    case MR_T_TIMESTAMP:
    case MR_T_DECIMAL: return mr_column_append_int64(dst, ((const int64_t *)src->data)[row]);
    case MR_T_DATE: return mr_column_append_int32(dst, ((const int32_t *)src->data)[row]);
    case MR_T_FLOAT64: return mr_column_append_float64(dst, ((const double *)src->data)[row]);
    case MR_T_FLOAT32: return mr_column_append_float32(dst, ((const float *)src->data)[row]);
    case MR_T_STRING: {
        size_t len;
        const char *s = mr_column_str(src, row, &len);
        return mr_column_append_str(dst, s, len);
    }
    default: return MR_E_INTERNAL;
    }
}

/* Builds a batch from refs[0..n) (every block ready). */
static mr_status gather(mr_loader *ld, const ref *refs, size_t n, mr_table **out, mr_error *err)
{
    mr_table *t = NULL;
    mr_status rc = mr_table_new(&t, err);
    for (size_t k = 0; rc == MR_OK && k < ld->plan.n_out; k++) {
        mr_column *c = NULL;
        rc = mr_column_new(ld->plan.out_names[k], ld->ds->types[ld->plan.out_cols[k]], n, &c, err);
        if (rc == MR_OK) c->kind = ld->ds->kinds[ld->plan.out_cols[k]];
        for (size_t i = 0; rc == MR_OK && i < n; i++) {
            const mr_table *bt = ld->blocks[REF_BLOCK(refs[i])].t;
            rc = append_value(c, bt->cols[k], REF_ROW(refs[i]));
            if (rc != MR_OK) rc = MR_ERR(err, rc, "out of memory assembling a batch");
        }
        if (rc == MR_OK) rc = mr_table_add_column(t, c, err);
        else mr_column_free(c);
    }
    if (rc != MR_OK) {
        mr_table_free(t);
        return rc;
    }
    t->n_rows = n;
    *out = t;
    return MR_OK;
}

/* Marks one emitted row of block b; frees its table after the last one. */
static void consumed(mr_loader *ld, size_t b)
{
    block *bk = &ld->blocks[b];
    if (--bk->remaining == 0 && bk->state == B_READY) {
        pthread_mutex_lock(&ld->mu);
        mr_table_free(bk->t);
        bk->t = NULL;
        bk->state = B_FREED;
        pthread_mutex_unlock(&ld->mu);
    }
}

/* Builds the decode queue after the replay: blocks still referenced by the
 * buffer, then the rest of the stream, skipping blocks with nothing left. */
static mr_status build_queue(mr_loader *ld, mr_error *err)
{
    size_t *q = mr_calloc(ld->n_blocks ? ld->n_blocks : 1, sizeof *q), n = 0;
    if (!q) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < ld->buf_n; i++) {
        block *bk = &ld->blocks[REF_BLOCK(ld->buf[i])];
        if (bk->qidx == SIZE_MAX) {
            bk->qidx = n;
            q[n++] = REF_BLOCK(ld->buf[i]);
        }
    }
    for (size_t p = ld->pos; p < ld->n_blocks; p++) {
        block *bk = &ld->blocks[ld->order[p]];
        if (bk->qidx != SIZE_MAX || (bk->count >= 0 && bk->remaining == 0)) continue;
        bk->qidx = n;
        q[n++] = ld->order[p];
    }
    pthread_mutex_lock(&ld->mu); /* publish the queue to the workers */
    ld->queue = q;
    ld->n_queue = n;
    ld->touched_hi = n ? 1 : 0;
    pthread_cond_broadcast(&ld->cv_work);
    pthread_mutex_unlock(&ld->mu);
    return MR_OK;
}

static int push_batch(mr_loader *ld, mr_table *t, uint64_t first, uint32_t *shard)
{
    pthread_mutex_lock(&ld->mu);
    while (ld->b_n == ld->prefetch && !ld->stop) pthread_cond_wait(&ld->cv_batch, &ld->mu);
    int ok = !ld->stop;
    if (ok) {
        size_t i = (ld->b_head + ld->b_n) % ld->prefetch;
        ld->batches[i] = t;
        mr_free(ld->slots[i].shard);
        ld->slots[i] = (slot){ld->decode_col ? S_RAW : S_READY, first, shard, NULL, 0, 0};
        ld->b_n++;
        pthread_cond_broadcast(&ld->cv_batch);
        if (ld->decode_col) pthread_cond_broadcast(&ld->cv_work);
    }
    pthread_mutex_unlock(&ld->mu);
    if (!ok) {
        mr_table_free(t);
        mr_free(shard);
    }
    return ok;
}

/* The binary column that will hold batch t's samples, back to back (mr_image_out_bytes each). */
static mr_status image_column(mr_loader *ld, const mr_table *t, mr_column **out, mr_error *err)
{
    const mr_column *src = mr_table_column(t, ld->decode_col);
    if (!src) return MR_ERR(err, MR_E_INTERNAL, "loader: the batch has no column '%s'", ld->decode_col);
    size_t one = mr_image_out_bytes(&ld->img), n = t->n_rows;
    mr_column *c = NULL;
    mr_status rc = mr_column_new(src->name, MR_T_STRING, 0, &c, err);
    if (rc != MR_OK) return rc;
    mr_free(c->offsets);
    c->offsets = mr_malloc((n + 1) * sizeof *c->offsets);
    mr_free(c->bytes);
    c->bytes = mr_malloc(n && one ? n * one : 1);
    if (!c->offsets || !c->bytes) {
        mr_column_free(c);
        return MR_ERR(err, MR_E_NOMEM, "out of memory for a batch of %zu images", n);
    }
    c->kind.flags |= MR_KIND_BINARY;
    c->n = c->cap = n;
    c->bytes_len = c->bytes_cap = n * one;
    for (size_t i = 0; i <= n; i++) c->offsets[i] = (int64_t)(i * one);
    *out = c;
    return MR_OK;
}

/* Decodes images [a, b) of batch t (its rows are positions sl->first ...) into sl->col. */
static mr_status decode_range(mr_loader *ld, const mr_table *t, const slot *sl, size_t a, size_t b, uint64_t *bad,
                              mr_error *err)
{
    const mr_column *src = mr_table_column(t, ld->decode_col);
    const mr_column *paths = mr_table_column(t, "path");
    if (paths && paths->type != MR_T_STRING) paths = NULL;
    size_t one = mr_image_out_bytes(&ld->img);
    for (size_t i = a; i < b; i++) {
        char *dst = sl->col->bytes + i * one;
        mr_error e;
        mr_error_init(&e);
        size_t len = 0;
        const char *data = mr_column_is_null(src, i) ? NULL : mr_column_str(src, i, &len);
        mr_status irc = data ? mr_image_decode(&ld->img, data, len, ld->seed, ld->epoch, sl->first + i, dst, &e)
                             : MR_ERR(&e, MR_E_CORRUPT, "the image is null");
        if (irc == MR_OK) continue;
        if (irc != MR_E_NOMEM && ld->skip_bad_images) {
            memset(dst, 0, one); /* zeros (a float sample of 0.0), counted */
            (*bad)++;
            continue;
        }
        uint32_t sh = sl->shard ? sl->shard[i] : UINT32_MAX;
        size_t pl = 0;
        const char *p = paths && !mr_column_is_null(paths, i) ? mr_column_str(paths, i, &pl) : NULL;
        mr_status rc = MR_ERR(err, irc, "%s%s%s%.*s%ssample %llu of epoch %llu, column '%s': %s",
                              sh != UINT32_MAX ? "shard " : "", sh != UINT32_MAX ? ld->ds->shards[sh].path : "",
                              p ? (sh != UINT32_MAX ? ", path " : "path ") : "", (int)(p ? (pl > 300 ? 300 : pl) : 0),
                              p ? p : "", sh != UINT32_MAX || p ? ", " : "", (unsigned long long)(sl->first + i),
                              (unsigned long long)ld->epoch, ld->decode_col, e.msg);
        if (sh != UINT32_MAX) mr_error_at(err, ld->ds->shards[sh].abs_path, 0, 0);
        mr_error_hint(err, "decode_skip_errors (on_error: skip) turns such images into zeros, counted");
        return rc;
    }
    return MR_OK;
}

static void *assembler_main(void *arg)
{
    mr_loader *ld = arg;
    batch_policy();
    mr_error err;
    mr_error_init(&err);
    mr_status rc = MR_OK;
    ref *refs = mr_malloc(ld->batch_size * sizeof *refs);
    if (!refs) rc = MR_ERR(&err, MR_E_NOMEM, "out of memory");
    /* replay: the rows before this rank's slice and of its skipped batches, references only */
    uint64_t own = ld->start_batch * (uint64_t)ld->batch_size; /* rows of the slice already delivered */
    if (own > ld->rank_len) own = ld->rank_len;
    uint64_t skip = ld->rank_begin + own, left = ld->rank_len - own;
    size_t pad_off = ld->pad && skip > ld->first_pad ? (size_t)(skip - ld->first_pad) : 0; /* resumed in the padding */
    uint64_t next_pos = skip; /* the sequence position of the next row delivered */
    int got = 1;
    for (uint64_t i = 0; rc == MR_OK && i < skip && got; i++) {
        ref r;
        rc = emit_next(ld, 0, &r, &got, &err);
        if (rc == MR_OK && got) ld->blocks[REF_BLOCK(r)].remaining--;
    }
    if (rc == MR_OK) rc = build_queue(ld, &err);
    while (rc == MR_OK && left) {
        size_t n = 0, want = left < ld->batch_size ? (size_t)left : ld->batch_size;
        while (got && n < want) {
            rc = emit_next(ld, 1, &refs[n], &got, &err);
            if (rc != MR_OK || !got) break;
            n++;
        }
        if (rc != MR_OK) break;
        size_t n_pad = 0;
        if (n < want && ld->pad) n_pad = want - n < ld->pad->n_rows - pad_off ? want - n : ld->pad->n_rows - pad_off;
        if (n + n_pad == 0 || (n + n_pad < ld->batch_size && ld->drop_last)) break;
        left -= n + n_pad;
        for (size_t i = 0; i < n; i++) /* touch first so the workers start on all of them */
            if (!i || REF_BLOCK(refs[i]) != REF_BLOCK(refs[i - 1])) touch(ld, REF_BLOCK(refs[i]));
        for (size_t i = 0; i < n && rc == MR_OK; i++)
            if ((!i || REF_BLOCK(refs[i]) != REF_BLOCK(refs[i - 1])) && wait_block(ld, REF_BLOCK(refs[i])))
                rc = MR_E_INTERRUPTED;
        mr_table *t = NULL;
        if (rc == MR_OK && n) rc = gather(ld, refs, n, &t, &err);
        if (rc == MR_OK && n_pad) { /* this rank's slice ran past the end of the sequence */
            mr_table *p = NULL;
            rc = mr_table_slice(ld->pad, pad_off, pad_off + n_pad, &p, &err);
            if (rc == MR_OK && t) rc = mr_table_append(t, p, &err);
            if (rc == MR_OK && !t) {
                t = p;
                p = NULL;
            }
            mr_table_free(p);
            pad_off += n_pad;
        }
        if (rc != MR_OK) {
            mr_table_free(t);
            break;
        }
        uint32_t *shard = NULL;
        if (ld->decode_col && (shard = mr_malloc((n + n_pad + 1) * sizeof *shard)) != NULL)
            for (size_t i = 0; i < n + n_pad; i++) shard[i] = i < n ? (uint32_t)ld->blocks[REF_BLOCK(refs[i])].shard : UINT32_MAX;
        for (size_t i = 0; i < n; i++) consumed(ld, REF_BLOCK(refs[i]));
        uint64_t first = next_pos;
        next_pos += n + n_pad;
        if (!push_batch(ld, t, first, shard)) break;
    }
    mr_free(refs);
    pthread_mutex_lock(&ld->mu);
    if (rc != MR_OK && rc != MR_E_INTERRUPTED) fail_locked(ld, rc, &err);
    ld->done = 1;
    pthread_cond_broadcast(&ld->cv_batch);
    pthread_mutex_unlock(&ld->mu);
    return NULL;
}

/* ---- open / next / close ---------------------------------------------------------------------- */

static mr_status plan_blocks(mr_loader *ld, mr_error *err)
{
    const mr_dataset *ds = ld->ds;
    size_t cap = 0;
    ld->files = mr_calloc(ds->n_shards ? ds->n_shards : 1, sizeof *ld->files);
    if (!ld->files) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < ds->n_shards; i++) {
        if (ld->plan.shard_prune[i] == MR_PRUNE_NONE) continue;
        mr_status rc = mr__ds_open_shard(ds, i, &ld->files[i], err);
        if (rc != MR_OK) return rc;
        for (size_t g = 0; g < mr_parquet_num_row_groups(ld->files[i]); g++) {
            mr_prune pr = mr__ds_rg_prune(&ld->plan, i, ld->files[i], g, NULL);
            if (pr == MR_PRUNE_NONE) continue;
            if (mr_parquet_row_group_rows(ld->files[i], g) > (int64_t)UINT32_MAX)
                return MR_ERR(err, MR_E_LIMIT, "loader: row group too large");
            if (ld->n_blocks == cap) {
                size_t nc = cap ? cap * 2 : 64;
                block *nb = mr_realloc(ld->blocks, nc * sizeof *nb);
                if (!nb) return MR_ERR(err, MR_E_NOMEM, "out of memory");
                ld->blocks = nb;
                cap = nc;
            }
            block *bk = &ld->blocks[ld->n_blocks++];
            memset(bk, 0, sizeof *bk);
            bk->shard = i;
            bk->rg = g;
            bk->prune = pr;
            bk->qidx = SIZE_MAX;
            bk->count = -1;
            if (!ld->plan.filter || pr == MR_PRUNE_ALL) {
                bk->count = mr_parquet_row_group_rows(ld->files[i], g);
                bk->remaining = (uint64_t)bk->count;
            }
        }
    }
    if (ld->n_blocks > UINT32_MAX) return MR_ERR(err, MR_E_LIMIT, "loader: too many row groups");
    ld->order = mr_calloc(ld->n_blocks ? ld->n_blocks : 1, sizeof *ld->order);
    if (!ld->order) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; i < ld->n_blocks; i++) ld->order[i] = i;
    if (ld->shuffle)
        for (size_t i = ld->n_blocks; i > 1; i--) { /* Fisher-Yates */
            size_t j = (size_t)mr_rng_below(&ld->rng, i);
            size_t tmp = ld->order[i - 1];
            ld->order[i - 1] = ld->order[j];
            ld->order[j] = tmp;
        }
    return MR_OK;
}

static void stop_threads(mr_loader *ld)
{
    pthread_mutex_lock(&ld->mu);
    ld->stop = 1;
    pthread_cond_broadcast(&ld->cv_work);
    pthread_cond_broadcast(&ld->cv_block);
    pthread_cond_broadcast(&ld->cv_batch);
    pthread_mutex_unlock(&ld->mu);
    if (ld->assembler_started) pthread_join(ld->assembler, NULL);
    for (int i = 0; i < ld->n_started; i++) pthread_join(ld->workers[i], NULL);
    ld->assembler_started = 0;
    ld->n_started = 0;
}

void mr_loader_close(mr_loader *ld)
{
    if (!ld) return;
    stop_threads(ld);
    for (size_t i = 0; i < ld->b_n; i++) mr_table_free(ld->batches[(ld->b_head + i) % ld->prefetch]);
    for (size_t i = 0; ld->slots && i < ld->prefetch; i++) {
        mr_free(ld->slots[i].shard);
        mr_column_free(ld->slots[i].col); /* a batch stopped half decoded */
    }
    mr_free(ld->slots);
    for (size_t b = 0; b < ld->n_blocks; b++) mr_table_free(ld->blocks[b].t);
    mr_table_free(ld->pad);
    if (ld->files)
        for (size_t i = 0; i < ld->ds->n_shards; i++) mr_parquet_close(ld->files[i]);
    pthread_mutex_destroy(&ld->mu);
    pthread_cond_destroy(&ld->cv_work);
    pthread_cond_destroy(&ld->cv_block);
    pthread_cond_destroy(&ld->cv_batch);
    mr__ds_plan_deinit(&ld->plan);
    mr_dataset_close(ld->ds);
    mr_free(ld->files);
    mr_free(ld->blocks);
    mr_free(ld->order);
    mr_free(ld->buf);
    mr_free(ld->queue);
    mr_free(ld->batches);
    mr_free(ld->workers);
    mr_free(ld);
}

/* Images: the column must be an output binary (or string) column; the options must hold. */
static mr_status plan_decode(mr_loader *ld, const mr_loader_opts *opts, mr_error *err)
{
    mr_status rc = mr_image_opts_check(&opts->image, err);
    if (rc != MR_OK) return rc;
    for (size_t k = 0; k < ld->plan.n_out; k++) {
        size_t j = ld->plan.out_cols[k];
        if (strcmp(ld->ds->names[j], opts->decode_column)) continue;
        if (ld->ds->types[j] != MR_T_STRING)
            return MR_ERR(err, MR_E_SCHEMA, "loader: decode column '%s' is %s, not binary", opts->decode_column,
                          mr_dtype_name(ld->ds->types[j]));
        ld->decode_col = ld->ds->names[j];
        ld->img = opts->image;
        ld->skip_bad_images = opts->decode_skip_errors;
        ld->seed = opts->seed;
        ld->epoch = opts->epoch;
        if (ld->prefetch < (size_t)ld->n_threads * 2) ld->prefetch = (size_t)ld->n_threads * 2; /* a batch per thread in flight */
        return MR_OK;
    }
    rc = MR_ERR(err, MR_E_NOT_FOUND, "loader: decode column '%s' is not among the output columns", opts->decode_column);
    mr_error_hint(err, "name a binary column of the dataset (and list it in columns, when columns are given)");
    return rc;
}

/* This rank's slice [rank_begin, rank_begin + rank_len) of the N-row sequence, and the rows that
 * pad it past the end: row p >= N is row p mod N, read by a loader of the whole sequence. */
static mr_status plan_rank(mr_loader *ld, const char *dir, const mr_loader_opts *opts, mr_error *err)
{
    uint64_t n = 0, w = (uint64_t)opts->world_size, bs = ld->batch_size;
    for (size_t b = 0; b < ld->n_blocks; b++) {
        mr_status rc = block_count(ld, b, 0, err);
        if (rc != MR_OK) return rc;
        n += (uint64_t)ld->blocks[b].count;
    }
    uint64_t len = opts->drop_last ? n / (w * bs) * bs : (n + w - 1) / w;
    ld->rank_begin = (uint64_t)opts->rank * len;
    ld->rank_len = len;
    uint64_t end = ld->rank_begin + len, first_pad = ld->rank_begin > n ? ld->rank_begin : n;
    ld->first_pad = first_pad;
    if (opts->drop_last || end <= n || n == 0) return MR_OK;
    uint64_t need = end - n; /* the pad rows are rows (first_pad - n .. need) mod n of the sequence */
    mr_loader_opts o = *opts;
    o.world_size = 0;
    o.rank = 0;
    o.start_batch = 0;
    o.decode_column = NULL; /* raw: this loader decodes them, at their positions past the end */
    o.drop_last = 0;
    o.batch_size = (size_t)(need < n ? need : n);
    mr_loader *sub = NULL;
    mr_table *head = NULL;
    uint32_t *idx = NULL;
    mr_status rc = mr_loader_open(dir, &o, &sub, err);
    if (rc == MR_OK) rc = mr_loader_next(sub, &head, err);
    if (rc == MR_OK && (!head || head->n_rows != o.batch_size))
        rc = MR_ERR(err, MR_E_INTERNAL, "loader: the sequence's first %zu rows could not be read again", o.batch_size);
    size_t k = (size_t)(end - first_pad);
    if (rc == MR_OK && !(idx = mr_malloc(k * sizeof *idx))) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < k; i++) idx[i] = (uint32_t)((first_pad + i - n) % n);
    if (rc == MR_OK) rc = mr_table_take(head, idx, k, &ld->pad, err);
    mr_free(idx);
    mr_table_free(head);
    mr_loader_close(sub);
    return rc;
}

mr_status mr_loader_open(const char *dir, const mr_loader_opts *opts, mr_loader **out, mr_error *err)
{
    mr_loader_opts def;
    if (!opts) {
        mr_loader_opts_init(&def);
        opts = &def;
    }
    *out = NULL;
    if (opts->threads < 0 || opts->threads > MAX_THREADS)
        return MR_ERR(err, MR_E_INVALID_ARG, "loader: threads must be 0..%d, got %d", MAX_THREADS, opts->threads);
    if (opts->batch_size > UINT32_MAX)
        return MR_ERR(err, MR_E_INVALID_ARG, "loader: batch_size %zu is too large", opts->batch_size);
    if (opts->world_size < 0 || (opts->world_size > 1 && (opts->rank < 0 || opts->rank >= opts->world_size)) ||
        (opts->world_size <= 1 && opts->rank != 0))
        return MR_ERR(err, MR_E_INVALID_ARG, "loader: rank %d is not in 0..world_size-1 (world_size %d)", opts->rank,
                      opts->world_size);
    mr_loader *ld = mr_calloc(1, sizeof *ld);
    if (!ld) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    pthread_mutex_init(&ld->mu, NULL);
    pthread_cond_init(&ld->cv_work, NULL);
    pthread_cond_init(&ld->cv_block, NULL);
    pthread_cond_init(&ld->cv_batch, NULL);
    mr_error_init(&ld->fail_err);
    ld->t_open = ld->t_last = mr_now();
    ld->batch_size = opts->batch_size ? opts->batch_size : DEFAULT_BATCH;
    ld->shuffle = opts->shuffle;
    ld->drop_last = opts->drop_last;
    ld->start_batch = opts->start_batch;
    ld->prefetch = opts->prefetch_batches ? opts->prefetch_batches : DEFAULT_PREFETCH;
    int cpus = mr_cpu_count();
    ld->n_threads = opts->threads ? opts->threads : (cpus < 4 ? (cpus > 0 ? cpus : 1) : 4);
    ld->lookahead = (size_t)ld->n_threads * 2 + 1;
    ld->buf_cap = opts->shuffle ? (opts->shuffle_buffer_rows ? opts->shuffle_buffer_rows : DEFAULT_SHUFFLE_BUFFER) : 0;
    rng_seed(&ld->rng, opts->seed, opts->epoch);
    mr_status rc = mr_dataset_open(dir, &ld->ds, err);
    if (rc == MR_OK) rc = mr__ds_plan_init(&ld->plan, ld->ds, opts->filter, opts->columns, opts->n_columns, err);
    else ld->plan.ds = NULL;
    if (rc == MR_OK) rc = plan_blocks(ld, err);
    if (rc == MR_OK && opts->decode_column) rc = plan_decode(ld, opts, err);
    ld->rank_len = UINT64_MAX;
    if (rc == MR_OK && opts->world_size > 1) rc = plan_rank(ld, dir, opts, err);
    if (rc == MR_OK && ld->buf_cap > 1) {
        ld->buf = mr_calloc(ld->buf_cap, sizeof *ld->buf);
        if (!ld->buf) rc = MR_ERR(err, MR_E_NOMEM, "out of memory for a shuffle buffer of %zu rows", ld->buf_cap);
    }
    if (rc == MR_OK) {
        ld->batches = mr_calloc(ld->prefetch, sizeof *ld->batches);
        ld->slots = mr_calloc(ld->prefetch, sizeof *ld->slots);
        ld->workers = mr_calloc((size_t)ld->n_threads, sizeof *ld->workers);
        if (!ld->batches || !ld->slots || !ld->workers) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    for (int i = 0; rc == MR_OK && i < ld->n_threads; i++) {
        if (pthread_create(&ld->workers[i], NULL, worker_main, ld) != 0)
            rc = MR_ERR(err, MR_E_INTERNAL, "loader: cannot start a thread");
        else ld->n_started++;
    }
    if (rc == MR_OK) {
        if (pthread_create(&ld->assembler, NULL, assembler_main, ld) != 0)
            rc = MR_ERR(err, MR_E_INTERNAL, "loader: cannot start a thread");
        else ld->assembler_started = 1;
    }
    if (rc != MR_OK) {
        if (!ld->ds) ld->files = NULL;
        mr_loader_close(ld);
        return rc;
    }
    *out = ld;
    return MR_OK;
}

mr_status mr_loader_next(mr_loader *ld, mr_table **out, mr_error *err)
{
    *out = NULL;
    double t0 = mr_now();
    mr_status rc = MR_OK;
    pthread_mutex_lock(&ld->mu);
    while (!ld->failed && (ld->b_n == 0 ? !ld->done : ld->slots[ld->b_head].state != S_READY)) {
        if (ld->b_n && ld->decode_col && unclaimed(ld, ld->b_head)) decode_chunk_locked(ld, ld->b_head); /* help */
        else pthread_cond_wait(&ld->cv_batch, &ld->mu);
    }
    if (ld->failed) {
        rc = ld->fail_rc;
        if (err && !mr_error_is_set(err)) *err = ld->fail_err;
    } else if (ld->b_n) {
        *out = ld->batches[ld->b_head];
        ld->b_head = (ld->b_head + 1) % ld->prefetch;
        ld->b_n--;
        pthread_cond_broadcast(&ld->cv_batch);
    }
    pthread_mutex_unlock(&ld->mu);
    double t1 = mr_now();
    ld->wait_s += t1 - t0;
    ld->t_last = t1;
    if (*out) {
        ld->n_batches++;
        ld->n_rows += (*out)->n_rows;
    }
    return rc;
}

void mr_loader_stats_get(const mr_loader *ld, mr_loader_stats *out)
{
    memset(out, 0, sizeof *out);
    out->wait_seconds = ld->wait_s;
    out->total_seconds = ld->t_last - ld->t_open;
    double f = out->total_seconds > 0 ? out->wait_seconds / out->total_seconds : 0;
    out->input_bound_fraction = f < 0 ? 0 : f > 1 ? 1 : f;
    out->batches = ld->n_batches;
    out->rows = ld->n_rows;
    out->blocks = ld->n_blocks;
    pthread_mutex_lock((pthread_mutex_t *)&ld->mu);
    out->blocks_decoded = ld->decoded;
    out->decode_seconds = ld->decode_s;
    out->images = ld->n_images;
    out->decode_errors = ld->n_bad_images;
    pthread_mutex_unlock((pthread_mutex_t *)&ld->mu);
}
