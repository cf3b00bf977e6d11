/* An S3 client: objects in a bucket of Amazon S3 or a compatible service,
 * over libcurl, every request signed with AWS Signature Version 4 (the
 * signer is here too, and public so that the suite checks it against AWS's
 * published examples and botocore). The remote cache and the s3:// data
 * sources sit on top of it (docs/remote.md).
 *
 * Example:
 *
 *   mr_s3_opts o;
 *   mr_s3_opts_init(&o);
 *   o.endpoint = "http://127.0.0.1:9000";       // NULL: AWS, https://s3.REGION.amazonaws.com
 *   mr_s3 *s = NULL;
 *   if (mr_s3_open("my-bucket", &o, &s, &err) == MR_OK) {
 *       mr_buf b;
 *       mr_buf_init(&b);
 *       if (mr_s3_put(s, "runs/a.txt", "hello", 5, &err) == MR_OK &&
 *           mr_s3_get(s, "runs/a.txt", 1, 3, &b, &err) == MR_OK)  // bytes 1..3: "ell"
 *           printf("%.*s\n", (int)b.len, b.data);
 *       mr_buf_free(&b);
 *   }
 *   mr_s3_close(s);
 *
 * Credentials (mr_s3_credentials_load), as every AWS tool finds them: the
 * environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN),
 * else the profile AWS_PROFILE (or "default") of the shared credentials
 * file (AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials) and of the
 * config file (AWS_CONFIG_FILE, else ~/.aws/config, "[profile NAME]"). The
 * region: the option, AWS_REGION, AWS_DEFAULT_REGION, the profile's
 * region, else us-east-1. No secret ever appears in a message.
 *
 * Requests that fail on the way (no connection, a reset, a timeout) or with
 * 500, 502, 503, 504 or 429 (throttling) are retried with exponential
 * backoff and full jitter, up to opts.retries times; others fail at once
 * with the service's code and message, naming s3://BUCKET/KEY.
 *
 * Status codes: MR_E_NOT_FOUND (no such key or bucket: 404), MR_E_STATE
 * (403: a wrong key or secret, no permission), MR_E_IO (the service, the
 * network, a local file), MR_E_CORRUPT (a response that is not what S3
 * answers), MR_E_INVALID_ARG, MR_E_NOMEM.
 * Thread safety: an mr_s3 is one connection, used by one thread at a time;
 * open one per thread for parallel transfers. */
#ifndef MILLRACE_S3_H
#define MILLRACE_S3_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Signature Version 4 -------------------------------------------------- */

typedef struct mr_sigv4_request {
    const char *method;           /* "GET", "PUT", ... */
    const char *host;             /* as the Host header carries it: name[:port] */
    const char *path;             /* the URI path, percent-encoded as sent ("/" at least) */
    const char *const *query;     /* n_query (name, value) pairs, not encoded: they are sorted and encoded here */
    size_t n_query;
    const char *const *headers;   /* n_headers more "name:value" headers to sign (range, content-type, ...) */
    size_t n_headers;
    const char *payload_sha256;   /* hex SHA-256 of the body (or "UNSIGNED-PAYLOAD") */
    int sign_payload_header;      /* 1: also sign x-amz-content-sha256 (S3 wants it sent and signed) */
    const char *amz_date;         /* "YYYYMMDDTHHMMSSZ" */
    const char *region, *service; /* "us-east-1", "s3" */
    const char *access_key, *secret_key;
    const char *session_token;    /* NULL: none; else signed as x-amz-security-token */
} mr_sigv4_request;

/* Writes the Authorization header's value into auth and the canonical
 * query string (sorted, encoded: what the URL must carry) into query.
 * MR_E_INVALID_ARG for a request missing a part, MR_E_NOMEM. */
mr_status mr_sigv4_sign(const mr_sigv4_request *r, mr_buf *auth, mr_buf *query);
/* Appends s percent-encoded as SigV4 wants (RFC 3986 unreserved bytes kept;
 * '/' kept when keep_slash). */
mr_status mr_s3_uri_encode(const char *s, int keep_slash, mr_buf *out);
/* The hex SHA-256 of p[0, n) (65 bytes with the NUL). */
void mr_sha256_hex(const void *p, size_t n, char hex[65]);

/* ---- credentials ------------------------------------------------------------ */

typedef struct mr_s3_credentials {
    char access_key[256], secret_key[256], session_token[4096];
    char region[64];
    char source[320]; /* where they came from, for messages: "the environment", "~/.aws/credentials [default]" */
} mr_s3_credentials;

/* Finds credentials and the region as described above (profile NULL:
 * AWS_PROFILE or "default"). MR_E_NOT_FOUND with a hint when there are
 * none, MR_E_PARSE (a malformed file, naming its line), MR_E_IO. */
mr_status mr_s3_credentials_load(const char *profile, mr_s3_credentials *out, mr_error *err);

/* ---- the client ----------------------------------------------------------------- */

typedef struct mr_s3_opts {
    const char *endpoint;     /* "http[s]://host[:port]"; NULL: https://s3.REGION.amazonaws.com */
    const char *region;       /* NULL: the credentials' region */
    int path_style;           /* 1: ENDPOINT/BUCKET/KEY; 0: BUCKET.HOST/KEY (virtual-hosted); -1: path style
                                 with an endpoint, virtual-hosted on AWS (the default) */
    const char *profile;      /* NULL: AWS_PROFILE or "default" */
    int retries;              /* attempts after the first (default 4) */
    long connect_timeout_ms;  /* default 10,000 */
    long timeout_ms;          /* a whole request that makes no progress for this long (default 60,000) */
    uint64_t multipart_bytes; /* files above this go in parts of this size (default 64 MiB; at least 5 MiB) */
    const mr_s3_credentials *credentials; /* NULL: mr_s3_credentials_load(profile) */
} mr_s3_opts;

void mr_s3_opts_init(mr_s3_opts *o);

typedef struct mr_s3 mr_s3;

/* A client of bucket. Loads the credentials; sends nothing yet. */
mr_status mr_s3_open(const char *bucket, const mr_s3_opts *o, mr_s3 **out, mr_error *err);
void mr_s3_close(mr_s3 *s); /* NULL is a no-op */

/* Counters of what the client sent (for tests and `--explain`). */
typedef struct mr_s3_stats {
    uint64_t requests;       /* HTTP requests, retries included */
    uint64_t retries;
    uint64_t bytes_up, bytes_down; /* bodies */
} mr_s3_stats;
void mr_s3_get_stats(const mr_s3 *s, mr_s3_stats *out);

/* Puts n bytes at key (one request). */
mr_status mr_s3_put(mr_s3 *s, const char *key, const void *data, size_t n, mr_error *err);
/* Puts the file at path at key: one request, or a multipart upload for a
 * file above opts.multipart_bytes (aborted if a part fails). */
mr_status mr_s3_put_file(mr_s3 *s, const char *key, const char *path, mr_error *err);
/* Appends bytes [off, off + len) of key to out (len 0: to the end); fewer
 * only where the object ends. */
mr_status mr_s3_get(mr_s3 *s, const char *key, uint64_t off, uint64_t len, mr_buf *out, mr_error *err);
/* Writes the whole object into a new file at path (O_EXCL; removed on
 * failure). */
mr_status mr_s3_get_file(mr_s3 *s, const char *key, const char *path, mr_error *err);
/* The same, of the version etag (as a listing gives it, without quotes)
 * only: sent as If-Match, and the response's ETag compared as well (not
 * every service checks the condition). A newer version is MR_E_STATE,
 * "changed while it was read". */
mr_status mr_s3_get_version(mr_s3 *s, const char *key, const char *etag, uint64_t off, uint64_t len, mr_buf *out,
                            mr_error *err);
mr_status mr_s3_get_file_version(mr_s3 *s, const char *key, const char *etag, const char *path, mr_error *err);
/* The object's size (and, when etag is not NULL, its ETag without quotes,
 * into etag[0, 128)). MR_E_NOT_FOUND when there is none. */
mr_status mr_s3_head(mr_s3 *s, const char *key, uint64_t *size, char *etag, mr_error *err);
/* Deletes key (no error when it is absent). */
mr_status mr_s3_delete(mr_s3 *s, const char *key, mr_error *err);
/* Calls fn once per key under prefix, in the order the service lists
 * them, following continuation tokens (1,000 keys per request). fn
 * returns 0 to go on, else the listing stops and returns MR_E_INTERRUPTED. */
typedef int (*mr_s3_list_fn)(void *arg, const char *key, uint64_t size);
mr_status mr_s3_list(mr_s3 *s, const char *prefix, mr_s3_list_fn fn, void *arg, mr_error *err);
/* The same with each key's ETag, without its quotes ("" when the listing
 * has none). */
typedef int (*mr_s3_list_etag_fn)(void *arg, const char *key, uint64_t size, const char *etag);
mr_status mr_s3_list_etags(mr_s3 *s, const char *prefix, mr_s3_list_etag_fn fn, void *arg, mr_error *err);

/* Splits "s3://bucket/prefix" into its bucket and prefix (no leading
 * slash; "" for none). MR_E_INVALID_ARG naming what is wrong. */
mr_status mr_s3_parse_url(const char *url, char *bucket, size_t bucket_len, char *prefix, size_t prefix_len,
                          mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
