/* Point-in-time joins: for each row of an entity table (entity keys and a
 * timestamp per row, a training example), the latest values of each feature
 * view for the same keys whose event time is at or before the row's
 * timestamp and within the view's ttl. The `pit_join` op sits on top of this
 * (docs/featurestore.md).
 *
 * Example (given const mr_table *labels, const mr_table *clicks):
 *
 *   // labels: user_id, ts, label; clicks: user_id, event_ts, clicks_7d
 *   const char *keys[] = {"user_id"};
 *   const char *feats[] = {"clicks_7d"};
 *   mr_pit_view v = {.name = "clicks", .table = clicks, .keys = keys, .ts = "event_ts",
 *                    .ttl_us = 30 * MR_PIT_DAY_US, .features = feats, .n_features = 1};
 *   mr_table *out = NULL;
 *   uint64_t missing[1];
 *   if (mr_pit_join(labels, keys, 1, "ts", &v, 1, 0, &out, missing, &err) != MR_OK) mr_log_error(&err);
 *   // out: user_id, ts, label, clicks_7d; clicks_7d null where no event
 *   // at or before ts within 30 days (missing[0] of them)
 *   mr_table_free(out);
 *
 * The rule, the same for every view:
 *   - a view row matches an entity row when all keys are equal (a null key
 *     matches nothing) and its event time t satisfies t <= ts and, with a
 *     ttl, ts - t <= ttl (an event exactly ttl old still counts);
 *   - of the matches, the one with the latest event time wins; equal event
 *     times are broken by the created timestamp (the latest correction
 *     wins; a null created is older than any), then by the view's row order
 *     (the last row wins);
 *   - an entity row with a null timestamp or key, or without a match, gets
 *     nulls for the view's features (counted in missing[v]);
 *   - view rows with a null event time are never joined.
 * Timestamps are TIMESTAMP (microseconds) or DATE (a day reads as its
 * midnight, UTC) columns, in any mix; key columns must have the same type in
 * the entity table and the view (int64, string, date, timestamp or bool).
 *
 * Output: the entity table's columns, then each view's features in order,
 * named prefix + feature; rows in the entity table's order. The result is a
 * sort-merge (each view sorted by keys, event time, created time; the entity
 * rows once by keys and time), identical at any thread count: views are
 * joined in parallel on the process pool, each on its own.
 * Memory: the tables are in memory; the sort adds 4 bytes per view row and
 * 8 per entity row, the output its columns.
 * Ownership: everything is borrowed for the call; *out is the caller's.
 * Status codes: MR_E_NOT_FOUND (a key, timestamp or feature column that a
 * table lacks, with a did-you-mean hint), MR_E_SCHEMA (a key whose types
 * differ, a timestamp that is no timestamp or date, two output columns of
 * the same name), MR_E_INVALID_ARG (no keys, a NULL table, a negative ttl),
 * MR_E_LIMIT (a table of 2^32 - 1 rows or more), MR_E_NOMEM.
 * Thread safety: reentrant; the tables must not change during the call. */
#ifndef MILLRACE_PIT_H
#define MILLRACE_PIT_H

#include "millrace/core.h"
#include "millrace/dataset.h"
#include "millrace/table.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MR_PIT_SECOND_US INT64_C(1000000)
#define MR_PIT_DAY_US (INT64_C(86400) * MR_PIT_SECOND_US)

typedef struct mr_pit_view {
    const char *name;             /* for messages */
    const mr_table *table;        /* borrowed */
    const char *const *keys;      /* n_keys names, matched in order with the entity keys */
    const char *ts;               /* the event timestamp column */
    const char *created;          /* the created timestamp column (corrections), or NULL */
    int64_t ttl_us;               /* how old a value may be, microseconds; 0: no limit */
    const char *const *features;  /* the columns to join */
    size_t n_features;
    const char *prefix;           /* output names are prefix + feature; NULL: "" */
} mr_pit_view;

/* Joins views[0, n_views) to entities (see above). threads: 1 runs on the
 * calling thread, otherwise the process pool (0: all of it). missing may be
 * NULL, else n_views counts of entity rows without a value per view. */
mr_status mr_pit_join(const mr_table *entities, const char *const *keys, size_t n_keys, const char *ts,
                      const mr_pit_view *views, size_t n_views, int threads, mr_table **out, uint64_t *missing,
                      mr_error *err);

/* ---- the join written to a dataset, in bounded memory ----------------------
 *
 * mr_pit_join_write gives the same rows as mr_pit_join, written as a
 * dataset (the same bytes as mr_dataset_write_table of that table with the
 * same options), and holds less: each view is read (by the loader), joined,
 * and its features gathered in the entity table's order, then the view's
 * table is freed. With mem_bytes set, the gathered columns go to a scratch
 * Parquet file per view under tmp_dir (tmp_dir/pit-view-N.parquet, removed
 * before the call returns) and the output is written in batches of rows
 * that fit an eighth of mem_bytes, each read back from the scratch files
 * one row group per view (pread, so no file page stays mapped); the first
 * view is joined alone, the others on as many threads as views of its
 * footprint fit in half of mem_bytes. Memory then: the entity table, the
 * views being joined (each its columns, 4 bytes per view row and per entity
 * row, and its gathered columns until they are written), and one batch
 * with the writer's row group. The bytes are the same at any thread count
 * and any mem_bytes. */
typedef mr_status (*mr_pit_load_fn)(void *arg, size_t view, mr_table **out, mr_error *err);

typedef struct mr_pit_write_opts {
    int threads;                         /* as mr_pit_join's */
    uint64_t mem_bytes;                  /* the memory to keep to; 0: none (no scratch, one batch) */
    const char *tmp_dir;                 /* the scratch directory (exists), required with mem_bytes */
    mr_pit_load_fn load;                 /* NULL: views[v].table; else called once per view, from a
                                            pool thread (views[v].table unused): *out is freed by the
                                            join when it is done with it */
    void *load_arg;
    const mr_dataset_write_opts *write;  /* the output's; NULL: the defaults */
    const char *const *streams;          /* NULL, or per view NULL or a dataset directory holding the
                                            view's rows in the join's order (mr_pit_view_order, as a
                                            feature_view stage writes them): with mem_bytes, such a
                                            view is streamed from it a row group at a time instead of
                                            loaded; one whose rows are not in that order is loaded */
} mr_pit_write_opts;

typedef struct mr_pit_write_stats {
    uint64_t rows;        /* entity rows written */
    size_t cols;          /* output columns */
    uint64_t *missing;    /* NULL, or n_views counts of rows without a value (filled) */
    uint64_t *view_rows;  /* NULL, or n_views row counts of the views as read (filled) */
    size_t spilled;       /* views whose columns went through the scratch directory */
    size_t streamed;      /* views streamed from their sorted datasets */
    size_t unsorted;      /* views meant to be streamed whose rows were not in order (loaded) */
    size_t batch_rows;    /* rows per written batch */
    int lanes;            /* threads the views were joined on (with a limit: after the first) */
} mr_pit_write_stats;

/* Joins as mr_pit_join and writes the result to the dataset directory
 * out_dir (published with its manifest, last; nothing on failure but what
 * the caller removes). o NULL: no limit, the views' tables. stats may be
 * NULL. Errors: mr_pit_join's (a loaded view's naming the view; the first
 * failed view's when several fail), the loader's, MR_E_INVALID_ARG
 * (mem_bytes without tmp_dir), the dataset writer's and reader's. */
mr_status mr_pit_join_write(const mr_table *entities, const char *const *keys, size_t n_keys, const char *ts,
                            const mr_pit_view *views, size_t n_views, const mr_pit_write_opts *o, const char *out_dir,
                            mr_pit_write_stats *stats, mr_error *err);

/* The latest row of every entity across views[0, n_views), for an online
 * store: one row per distinct key tuple found in any view (keys named
 * keys[0, n_keys), sorted), then for each view its features (prefix +
 * feature) and a TIMESTAMP column "<prefix>__event_time" with the picked
 * row's event time (null where the view has no row for the key). The picks
 * follow mr_pit_join's rule as of the end of time, ttl ignored (a reader
 * applies it against its own clock). Errors as mr_pit_join's. */
mr_status mr_pit_latest(const char *const *keys, size_t n_keys, const mr_pit_view *views, size_t n_views, int threads,
                        mr_table **out, mr_error *err);

/* The order a join reads a view's rows in: by keys, event time, created
 * time (null first) and row, rows with a null key or event time left out.
 * A view written in this order (the feature_view op's) is joined with one
 * pass instead of a sort; two such runs one after the other (the rows so
 * far, then new rows sorted among themselves) cost one merge. *order_out
 * (caller frees) holds *n_out row numbers. Errors: MR_E_NOT_FOUND (a
 * column t lacks, with a did-you-mean), MR_E_SCHEMA (a key of another type
 * than int64, string, date, timestamp or bool; a time that is no timestamp
 * or date), MR_E_INVALID_ARG, MR_E_LIMIT, MR_E_NOMEM. */
mr_status mr_pit_view_order(const mr_table *t, const char *const *keys, size_t n_keys, const char *ts,
                            const char *created, uint32_t **order_out, size_t *n_out, mr_error *err);

/* A DATE value (days since 1970-01-01) as its midnight in microseconds,
 * clamped to INT64_MIN / INT64_MAX past about 292,000 years. */
int64_t mr_pit_date_us(int32_t days);
/* A moment as a timestamp (mr_timestamp_parse) or a date (its midnight,
 * UTC), in microseconds since the epoch: 0, or -1 (*us untouched). */
int mr_pit_parse_moment(const char *s, size_t len, int64_t *us);

/* Parses a duration: an integer number of seconds, or numbers with a unit
 * each, "30d", "12h", "90m", "45s", "1w", "1d12h" (w, d, h, m, s). Returns
 * MR_E_PARSE (no mr_error) for anything else, or a total past about
 * 292,000 years. */
mr_status mr_pit_parse_duration(const char *text, int64_t *us_out);

#ifdef __cplusplus
}
#endif
#endif
