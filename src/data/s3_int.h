/* Data files on S3 (private to the data room): one client per bucket,
 * shared by a dataset and its shards and locked around each request, with
 * a log of the requests made for `data inspect --explain`. The endpoint
 * comes from the environment as the AWS tools read it: AWS_ENDPOINT_URL_S3,
 * else AWS_ENDPOINT_URL, else MILLRACE_S3_ENDPOINT (scripts/start-s3.sh),
 * else AWS itself; credentials as mr_s3_credentials_load finds them. */
#ifndef MILLRACE_DATA_S3_INT_H
#define MILLRACE_DATA_S3_INT_H

#include "millrace/dataset.h"
#include "millrace/parquet.h"
#include "millrace/s3.h"

typedef struct mr__s3h mr__s3h;

/* 1 when path is an s3:// URL. */
int mr__is_s3(const char *path);
/* A client of URL's bucket; *key_out (the caller's) is the URL's key or
 * prefix, "" for the bucket's root. MR_E_INVALID_ARG for a malformed URL,
 * and the errors of mr_s3_open (credentials). */
mr_status mr__s3h_open(const char *url, mr__s3h **out, char **key_out, mr_error *err);
mr__s3h *mr__s3h_ref(mr__s3h *h);
void mr__s3h_unref(mr__s3h *h); /* NULL is a no-op */
const char *mr__s3h_bucket(const mr__s3h *h);
/* Where the key starts in an s3://BUCKET/KEY URL of h's bucket. */
size_t mr__s3h_key_at(const mr__s3h *h);

/* Appends bytes [off, off + len) of key to out (len 0: all of it), of the
 * version etag when it is not NULL or "" (mr_s3_get_version: a newer one
 * is MR_E_STATE); what ("manifest", "footer", "data", ...) is logged with
 * the request. */
mr_status mr__s3h_get(mr__s3h *h, const char *what, const char *key, const char *etag, uint64_t off, uint64_t len,
                      mr_buf *out, mr_error *err);
/* The whole object (of the version etag) into a new file at path. */
mr_status mr__s3h_get_file(mr__s3h *h, const char *key, const char *etag, const char *path, mr_error *err);
/* Every key under prefix with its size and ETag (one logged "list"
 * request per 1,000 keys). */
mr_status mr__s3h_list(mr__s3h *h, const char *prefix, mr_s3_list_etag_fn fn, void *arg, mr_error *err);
/* Opens key (size bytes, version etag) as a ranged Parquet file named
 * s3://BUCKET/KEY; the file holds a reference on h. */
mr_status mr__s3h_parquet_open(mr__s3h *h, const char *key, uint64_t size, const char *etag, mr_parquet_file **out,
                               mr_error *err);

/* A listing, kept: every object under prefix, sorted by key. */
typedef struct mr__s3_obj {
    char *key;
    uint64_t size;
    char etag[160];
} mr__s3_obj;
mr_status mr__s3h_list_all(mr__s3h *h, const char *prefix, mr__s3_obj **out, size_t *n_out, mr_error *err);
void mr__s3_objs_free(mr__s3_obj *v, size_t n);
/* The object of that key in a sorted listing, or NULL. */
const mr__s3_obj *mr__s3_find(const mr__s3_obj *v, size_t n, const char *key);
/* A version of objects (in the order given): "s3" and the hex xxh3-128 of
 * the bucket and each object's key, size and ETag, into id (at least
 * MR_S3_VERSION_LEN bytes). MR_E_NOMEM. */
mr_status mr__s3_version(const char *bucket, const mr__s3_obj *const *v, size_t n, char *id, mr_error *err);

/* The requests made so far through h (logged ones: at most 65,536 kept,
 * the rest counted). */
size_t mr__s3h_n_requests(const mr__s3h *h);
void mr__s3h_request(const mr__s3h *h, size_t i, mr_dataset_request *out);
void mr__s3h_totals(const mr__s3h *h, uint64_t *requests, uint64_t *bytes);

#endif
