/* Training-data loader over a dataset: batches of N rows of a column subset,
 * optionally filtered, optionally shuffled, decoded ahead of the consumer by
 * worker threads. The order is a pure function of (dataset, options, seed,
 * epoch): it does not depend on the thread count or on timing, so an
 * interrupted epoch can be reopened at (epoch, batch) and continues exactly.
 *
 * Example:
 *
 *   mr_loader_opts o;
 *   mr_loader_opts_init(&o);
 *   o.batch_size = 4096;
 *   o.shuffle = 1; o.seed = 42; o.epoch = 3;
 *   o.start_batch = 120;                 // resume: batches 120, 121, ... of epoch 3
 *   mr_loader *ld;
 *   if (mr_loader_open("data/train", &o, &ld, &err) != MR_OK) { mr_log_error(&err); return; }
 *   mr_table *b;
 *   while (mr_loader_next(ld, &b, &err) == MR_OK && b) {
 *       // ... train on b ...
 *       mr_table_free(b);
 *   }
 *   if (mr_error_is_set(&err)) mr_log_error(&err);
 *   mr_loader_stats st;
 *   mr_loader_stats_get(ld, &st);
 *   printf("input bound %.0f%% of the time\n", 100 * st.input_bound_fraction);
 *   mr_loader_close(ld);
 *
 * The sequence (the essay is in src/data/loader.c):
 *   1. blocks = the (shard, row group) pairs left after filter pruning, in
 *      manifest order; with shuffle they are permuted (Fisher-Yates) by a
 *      xoshiro256** stream seeded from splitmix64(seed, epoch);
 *   2. the row stream = each block's selected rows, in block order;
 *   3. with shuffle, rows pass through a buffer of shuffle_buffer_rows: once
 *      it is full, each output row is buffer[j] for j drawn from the same
 *      stream, and its slot takes the next incoming row (at the end the
 *      buffer drains the same way);
 *   4. batches are consecutive batch_size rows of the output (the last one
 *      may be short unless drop_last).
 *
 * Ranks (data-parallel training): with world_size W > 1 the sequence above
 * (N rows, fixed by seed and epoch alone) is cut into W contiguous slices of
 * L rows and rank r reads rows [r*L, r*L + L): the ranks' slices in rank
 * order are the W = 1 sequence. With drop_last, L = the largest multiple of
 * batch_size with W*L <= N (every rank gets the same number of full
 * batches; the last N - W*L rows are dropped). Without it L = ceil(N / W),
 * and the slices that run past the end are padded with rows from the start
 * of the sequence (row p >= N is row p mod N), fewer than W rows in all, so
 * every rank gets the same number of batches and no rank waits at a
 * collective because it ran dry. start_batch counts the rank's own batches.
 * Knowing N needs every row group's count: from the footers without a
 * filter, else by evaluating the filter's columns at open.
 *
 * Ownership: the loader is the caller's (mr_loader_close); each batch is
 * the caller's (mr_table_free). Options are read during open only.
 * Status codes: those of mr_dataset_open and mr_dataset_scan_open at open
 * (MR_E_NOT_FOUND, MR_E_CORRUPT, MR_E_PARSE, MR_E_SCHEMA), MR_E_INVALID_ARG
 * (threads, batch_size, rank or world_size out of range), MR_E_INTERNAL (a thread could not
 * start), MR_E_NOMEM; while decoding MR_E_IO, MR_E_CORRUPT, MR_E_LIMIT,
 * MR_E_NOMEM, returned by mr_loader_next.
 * Thread safety: one consumer thread per loader; the loader's own threads
 * decode (through the core pool when it is free). */
#ifndef MILLRACE_LOADER_H
#define MILLRACE_LOADER_H

#include "millrace/core.h"
#include "millrace/dataset.h"
#include "millrace/image.h"
#include "millrace/table.h"
#include "millrace/value.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct mr_loader_opts {
    size_t batch_size;             /* rows per batch; 0 = 1024 */
    const char *const *columns;    /* output columns (borrowed during open); NULL = all */
    size_t n_columns;
    const char *filter;            /* expression text, NULL = all rows */
    int shuffle;                   /* 0: dataset order */
    uint64_t seed;
    uint64_t epoch;
    uint64_t start_batch;          /* first batch to return (resume) */
    size_t shuffle_buffer_rows;    /* 0 = 65536; 1 = block shuffle only */
    size_t prefetch_batches;       /* assembled batches queued ahead; 0 = 4 */
    int threads;                   /* decoding threads; 0 = min(4, CPUs) */
    int drop_last;                 /* 1: no short last batch */
    int rank, world_size;          /* world_size > 1: this rank's slice of the epoch (below); 0/1 = all */
    /* Images (image.h): the binary column decode_column (JPEG/PNG) is decoded and augmented in the
     * loader's threads and replaced in each batch by a binary column whose every value is one
     * sample of mr_image_out_bytes(&image) bytes, back to back: its bytes are the batch's
     * N x H x W x 3 uint8 (or N x 3 x H x W float32) tensor. The random choices of a sample are a
     * pure function of (seed, epoch, its position in the epoch's sequence). */
    const char *decode_column;     /* NULL: no decoding */
    mr_image_opts image;           /* geometry, flip, output; init: mr_image_opts_init */
    int decode_skip_errors;        /* 1: an image that fails to decode is zeros, counted; 0: the error */
} mr_loader_opts;

void mr_loader_opts_init(mr_loader_opts *o); /* the defaults above */

/* Loader options from a value tree: a `loaders:` entry of millrace.yaml (an exec stage's), or
 * the JSON the Python package builds from its keywords; both take the same keys (docs/data.md,
 * Loader options): dataset, batch_size, columns, filter, shuffle, seed, epoch, start_batch,
 * threads, prefetch, drop_last, shuffle_buffer, rank, world_size, shapes (checked, used by the
 * Python package), decode, resize, center_crop, random_resized_crop, hflip, normalize, output,
 * on_error. Strings in opts point into v, which must outlive the spec's use. Errors:
 * MR_E_SCHEMA at the line and column of the bad key or value (an unknown key with a
 * did-you-mean), MR_E_NOMEM. */
typedef struct mr_loader_spec {
    mr_loader_opts opts;
    const char *dataset; /* the `dataset` key, or NULL */
    const char **columns; /* owned array behind opts.columns */
} mr_loader_spec;
mr_status mr_loader_spec_parse(const mr_value *v, mr_loader_spec *out, mr_error *err);
void mr_loader_spec_free(mr_loader_spec *s); /* NULL is a no-op */

typedef struct mr_loader_stats {
    double wait_seconds;           /* time mr_loader_next spent waiting for data */
    double total_seconds;          /* from open to the last mr_loader_next return */
    double input_bound_fraction;   /* wait / total, in [0, 1] */
    uint64_t batches, rows;        /* returned so far */
    uint64_t blocks, blocks_decoded; /* row groups in the epoch; decoded by this loader (resume skips some) */
    double decode_seconds;         /* thread-seconds spent decoding and augmenting images */
    uint64_t images, decode_errors; /* images decoded; of them failed (decode_skip_errors) */
} mr_loader_stats;

typedef struct mr_loader mr_loader;

/* Opens the dataset at dir, plans the epoch and starts the threads (opts
 * NULL = defaults). Errors: as mr_dataset_open and mr_dataset_scan_open
 * (bad filter or column), MR_E_INVALID_ARG, MR_E_INTERNAL, MR_E_NOMEM. */
mr_status mr_loader_open(const char *dir, const mr_loader_opts *opts, mr_loader **out, mr_error *err);
/* Next batch (the caller frees it), or *out = NULL at the end of the epoch;
 * blocks until one is decoded. String columns come out plain. Errors from
 * decoding (MR_E_IO, MR_E_CORRUPT naming the shard) are sticky: later
 * calls return the same status and error. */
mr_status mr_loader_next(mr_loader *ld, mr_table **out, mr_error *err);
void mr_loader_stats_get(const mr_loader *ld, mr_loader_stats *out); /* the consumer's thread */
/* Stops the threads and frees everything. NULL is a no-op. */
void mr_loader_close(mr_loader *ld);

#ifdef __cplusplus
}
#endif
#endif
