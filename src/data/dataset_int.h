/* Internals shared by the dataset files (dataset.c: writer, manifest, open;
 * dataset_scan.c: pruning and block reads; loader.c): the opened-dataset
 * struct and the scan plan that both the scan and the loader use to decide
 * which shards and row groups to read and to decode one row group.
 * Not a public API. */
#ifndef MR_DATA_DATASET_INT_H
#define MR_DATA_DATASET_INT_H

#include "millrace/dataset.h"
#include "millrace/expr.h"

typedef struct mr__ds_shard {
    char *path;                   /* relative, as in the manifest */
    char *abs_path;               /* dir/path */
    uint64_t rows, bytes, row_groups;
    char hash[MR_HASH_HEX_LEN + 1];
    size_t partition;             /* index into the distinct partitions */
    mr_dataset_col_stats *stats;  /* n_cols entries (schema order); strings owned (mr_malloc) */
    char etag[160];               /* on S3: the version listed at open, which every read asks for */
} mr__ds_shard;

struct mr_dataset {
    char *dir;
    size_t n_cols;
    char **names;
    mr_strindex name_ix;          /* names -> schema index */
    mr_dtype *types;
    mr_colkind *kinds;            /* from the manifest's "kind" (zero when absent) */
    int *nullable;
    int *is_part;                 /* n_cols: 1 for partition columns */
    size_t n_part;
    size_t part_cols[MR_DATASET_MAX_PARTITION_COLS]; /* schema indices, partition_by order */
    size_t n_shards;
    mr__ds_shard *shards;
    size_t n_partitions;
    uint64_t n_rows;
    int verify_crc;               /* check page CRCs when reading shards (mr_dataset_set_verify_checksums) */
    struct mr__s3h *s3;           /* a dataset on S3 (dir is s3://BUCKET/PREFIX), else NULL */
    size_t s3_key_at;             /* abs_path + s3_key_at is a shard's key in the bucket */
    char s3_version[MR_S3_VERSION_LEN]; /* of every object under the prefix, as listed at open */
    struct mr__s3_obj *s3_objs;   /* that listing, during open */
    size_t n_s3_objs;
};

/* What the scan and the loader share: the bound filter, the output and
 * needed columns, and the per-shard decisions of pruning steps 1 and 2. */
typedef struct mr__ds_plan {
    const mr_dataset *ds;
    mr_expr *filter;              /* bound to the full schema, or NULL */
    size_t n_out;
    size_t *out_cols;             /* schema indices of the output columns */
    char **out_names;             /* borrowed from ds */
    size_t n_need;
    size_t *need_cols;            /* out_cols + filter columns not in out (schema indices) */
    size_t n_fcols;
    size_t *fcols;                /* the filter's columns (schema indices) */
    uint8_t *shard_prune;         /* per shard: mr_prune after steps 1-2 (NONE = skip) */
    mr_dataset_explain ex;        /* steps 1-2 filled in by plan_init */
} mr__ds_plan;

mr_status mr__ds_plan_init(mr__ds_plan *p, const mr_dataset *ds, const char *filter, const char *const *columns,
                           size_t n_columns, mr_error *err);
void mr__ds_plan_deinit(mr__ds_plan *p);

/* Opens shard i's file and checks it against the manifest (rows, row groups). */
mr_status mr__ds_open_shard(const mr_dataset *ds, size_t i, mr_parquet_file **out, mr_error *err);

/* Step 3 for row group rg of shard i: the prune decision from the Parquet
 * row-group statistics (combined with the shard's decision), and the bytes a
 * full read of the row group would fetch (*rg_bytes, may be NULL). */
mr_prune mr__ds_rg_prune(const mr__ds_plan *p, size_t shard, mr_parquet_file *pf, size_t rg, uint64_t *rg_bytes);

/* Reads row group rg of shard i: the needed columns, partition columns made
 * constant, the filter applied unless prune is MR_PRUNE_ALL, then projected
 * to the output columns. count_only: reads only the filter's columns and
 * returns no table, only *n_selected. *out may be NULL-free'd by caller. */
mr_status mr__ds_read_block(const mr__ds_plan *p, size_t shard, mr_parquet_file *pf, size_t rg, mr_prune prune,
                            int count_only, mr_table **out, uint64_t *n_selected, mr_error *err);

/* Partition value k of shard i as a column of n rows (one value repeated). */
mr_status mr__ds_const_column(const mr_dataset *ds, size_t shard, size_t col, size_t n, mr_column **out,
                              mr_error *err);

#endif
