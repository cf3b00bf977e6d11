/* The S3 client (include/millrace/s3.h): one libcurl easy handle per client
 * (its connection kept alive between requests), every request signed with
 * SigV4 and its body's SHA-256 sent as x-amz-content-sha256; retries with
 * exponential backoff and full jitter; responses' XML (errors, listings,
 * multipart uploads) read with expat. */
#define _GNU_SOURCE
#include "millrace/s3.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <expat.h>
#include <openssl/evp.h>

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define MIN_PART ((uint64_t)5 << 20)

struct mr_s3 {
    CURL *curl;
    char *bucket;
    char *base;     /* scheme://host[:port] */
    char *host;     /* the Host header: host[:port] (virtual-hosted: bucket.host) */
    int path_style;
    mr_s3_credentials cred;
    char region[64];
    int retries;
    long connect_timeout_ms, timeout_ms;
    uint64_t multipart_bytes;
    mr_s3_stats stats;
    mr_rng rng;
};

void mr_s3_opts_init(mr_s3_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->path_style = -1;
    o->retries = 4;
    o->connect_timeout_ms = 10000;
    o->timeout_ms = 60000;
    o->multipart_bytes = (uint64_t)64 << 20;
}

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

mr_status mr_s3_parse_url(const char *url, char *bucket, size_t bucket_len, char *prefix, size_t prefix_len,
                          mr_error *err)
{
    if (!url || strncmp(url, "s3://", 5))
        return MR_ERR(err, MR_E_INVALID_ARG, "'%s': expected s3://BUCKET[/PREFIX]", url ? url : "");
    const char *b = url + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    if (bl < 3 || bl > 63 || bl >= bucket_len)
        return MR_ERR(err, MR_E_INVALID_ARG, "'%s': a bucket name has 3 to 63 characters", url);
    for (size_t i = 0; i < bl; i++)
        if (!((b[i] >= 'a' && b[i] <= 'z') || (b[i] >= '0' && b[i] <= '9') || b[i] == '-' || b[i] == '.'))
            return MR_ERR(err, MR_E_INVALID_ARG, "'%s': a bucket name has lower-case letters, digits, '-' and '.' only",
                          url);
    memcpy(bucket, b, bl);
    bucket[bl] = 0;
    const char *p = slash ? slash + 1 : "";
    while (*p == '/') p++;
    size_t pl = strlen(p);
    while (pl && p[pl - 1] == '/') pl--;
    if (pl >= prefix_len) return MR_ERR(err, MR_E_INVALID_ARG, "'%s': the prefix is too long", url);
    memcpy(prefix, p, pl);
    prefix[pl] = 0;
    return MR_OK;
}

mr_status mr_s3_open(const char *bucket, const mr_s3_opts *o, mr_s3 **out, mr_error *err)
{
    *out = NULL;
    mr_s3_opts d;
    if (!o) {
        mr_s3_opts_init(&d);
        o = &d;
    }
    if (!bucket || !*bucket) return MR_ERR(err, MR_E_INVALID_ARG, "an S3 client needs a bucket");
    pthread_once(&curl_once, curl_init);
    mr_s3 *s = mr_calloc(1, sizeof(*s));
    if (!s) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    mr_status rc = MR_OK;
    if (o->credentials) s->cred = *o->credentials;
    else rc = mr_s3_credentials_load(o->profile, &s->cred, err);
    if (rc == MR_OK) {
        snprintf(s->region, sizeof(s->region), "%s", o->region && *o->region ? o->region : s->cred.region[0] ? s->cred.region : "us-east-1");
        s->retries = o->retries >= 0 ? o->retries : 4;
        s->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 10000;
        s->timeout_ms = o->timeout_ms > 0 ? o->timeout_ms : 60000;
        s->multipart_bytes = o->multipart_bytes < MIN_PART ? MIN_PART : o->multipart_bytes;
        s->bucket = mr_strdup(bucket);
        const char *ep = o->endpoint;
        char aws[128];
        if (!ep) {
            snprintf(aws, sizeof(aws), "https://s3.%s.amazonaws.com", s->region);
            ep = aws;
        }
        if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
            rc = MR_ERR(err, MR_E_INVALID_ARG, "endpoint '%s': expected http://HOST[:PORT] or https://...", ep);
        } else {
            const char *h = strstr(ep, "://") + 3;
            size_t hl = strcspn(h, "/");
            s->path_style = o->path_style >= 0 ? o->path_style : o->endpoint != NULL;
            char *scheme = mr_asprintf("%.*s", (int)(h - ep), ep);
            if (s->path_style) {
                s->host = mr_asprintf("%.*s", (int)hl, h);
                s->base = scheme ? mr_asprintf("%s%.*s", scheme, (int)hl, h) : NULL;
            } else {
                s->host = mr_asprintf("%s.%.*s", bucket, (int)hl, h);
                s->base = scheme ? mr_asprintf("%s%s.%.*s", scheme, bucket, (int)hl, h) : NULL;
            }
            mr_free(scheme);
            s->curl = curl_easy_init();
            if (!s->bucket || !s->host || !s->base || !s->curl) rc = MR_ERR(err, MR_E_NOMEM, "out of memory");
        }
    }
    if (rc != MR_OK) {
        mr_s3_close(s);
        return rc;
    }
    mr_rng_seed(&s->rng, (uint64_t)getpid() ^ (uint64_t)(mr_now() * 1e9));
    *out = s;
    return MR_OK;
}

void mr_s3_close(mr_s3 *s)
{
    if (!s) return;
    if (s->curl) curl_easy_cleanup(s->curl);
    OPENSSL_cleanse(&s->cred, sizeof(s->cred));
    mr_free(s->bucket);
    mr_free(s->base);
    mr_free(s->host);
    mr_free(s);
}

void mr_s3_get_stats(const mr_s3 *s, mr_s3_stats *out) { *out = s->stats; }

/* ---- XML of responses ------------------------------------------------------------ */

/* Collects the text of elements by name (the last seen of each, or every
 * one through on_elem), for error bodies, listings and multipart replies. */
typedef struct xml_sink {
    const char *const *names; /* element names to collect */
    size_t n;
    mr_buf *vals;             /* n: their last text */
    mr_buf text;              /* the current element's text */
    int depth_hit;            /* inside a collected element */
    void (*on_elem)(void *arg, const char *name, const char *text);
    void *arg;
} xml_sink;

static void XMLCALL xml_start(void *ud, const XML_Char *name, const XML_Char **atts)
{
    (void)atts;
    xml_sink *x = ud;
    x->text.len = 0;
    x->depth_hit = 0;
    for (size_t i = 0; i < x->n; i++)
        if (!strcmp(name, x->names[i])) x->depth_hit = 1;
}

static void XMLCALL xml_chars(void *ud, const XML_Char *s, int len)
{
    xml_sink *x = ud;
    if (x->depth_hit) mr_buf_append(&x->text, s, (size_t)len);
}

static void XMLCALL xml_end(void *ud, const XML_Char *name)
{
    xml_sink *x = ud;
    if (!x->depth_hit) return;
    mr_buf_append(&x->text, "", 1);
    for (size_t i = 0; i < x->n; i++)
        if (!strcmp(name, x->names[i])) {
            x->vals[i].len = 0;
            mr_buf_append(&x->vals[i], x->text.data, x->text.len);
            if (x->on_elem) x->on_elem(x->arg, name, x->text.data);
        }
    x->depth_hit = 0;
    x->text.len = 0;
}

/* Parses body into vals[n] (each NUL-terminated when found, len 0 when not). 0 on success. */
static int xml_parse(const char *body, size_t len, const char *const *names, size_t n, mr_buf *vals,
                     void (*on_elem)(void *, const char *, const char *), void *arg)
{
    xml_sink x = {.names = names, .n = n, .vals = vals, .on_elem = on_elem, .arg = arg};
    mr_buf_init(&x.text);
    XML_Parser p = XML_ParserCreate(NULL);
    if (!p) return -1;
    XML_SetUserData(p, &x);
    XML_SetElementHandler(p, xml_start, xml_end);
    XML_SetCharacterDataHandler(p, xml_chars);
    int ok = XML_Parse(p, body, (int)len, 1) == XML_STATUS_OK;
    XML_ParserFree(p);
    mr_buf_free(&x.text);
    return ok ? 0 : -1;
}

/* ---- one request ---------------------------------------------------------------------- */

typedef struct req {
    const char *method;
    const char *key;              /* NULL: the bucket itself */
    const char *name;             /* for messages when key is NULL: the prefix listed */
    const char *const *query;     /* (name, value) pairs */
    size_t n_query;
    const char *const *headers;   /* more "name: value" headers, signed */
    size_t n_headers;
    const void *body;             /* in memory, or */
    int body_fd;                  /* a file region (fd >= 0): [body_off, body_off + body_len) */
    uint64_t body_off, body_len;
    const char *body_sha256;      /* its hash, hex */
    mr_buf *resp;                 /* the response body, or */
    int resp_fd;                  /* written to this file (truncated on a retry) */
    char etag[128];               /* out: the ETag header */
    uint64_t length;              /* out: Content-Length */
    long status;                  /* out */
} req;

typedef struct xfer {
    req *r;
    uint64_t sent;
    mr_buf errbody;               /* a failed response's body (for its code and message) */
    int write_failed;
} xfer;

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    req *r = x->r;
    size_t want = size * nmemb;
    uint64_t left = r->body_len - x->sent;
    if (want > left) want = (size_t)left;
    if (!want) return 0;
    if (r->body_fd >= 0) {
        ssize_t got = pread(r->body_fd, buf, want, (off_t)(r->body_off + x->sent));
        if (got <= 0) return CURL_READFUNC_ABORT;
        want = (size_t)got;
    } else {
        memcpy(buf, (const char *)r->body + x->sent, want);
    }
    x->sent += want;
    return want;
}

static size_t on_write(char *buf, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    req *r = x->r;
    size_t n = size * nmemb;
    long code = 0;
    (void)code;
    if (r->status >= 300 || (!r->resp && r->resp_fd < 0)) {
        if (x->errbody.len < 65536) mr_buf_append(&x->errbody, buf, n);
        return n;
    }
    if (r->resp_fd >= 0) {
        for (size_t o = 0; o < n;) {
            ssize_t w = write(r->resp_fd, buf + o, n - o);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0) {
                x->write_failed = errno ? errno : EIO;
                return 0;
            }
            o += (size_t)w;
        }
        return n;
    }
    if (mr_buf_append(r->resp, buf, n) != MR_OK) {
        x->write_failed = ENOMEM;
        return 0;
    }
    return n;
}

static size_t on_header(char *buf, size_t size, size_t nmemb, void *ud)
{
    xfer *x = ud;
    size_t n = size * nmemb;
    if (n > 5 && !strncmp(buf, "HTTP/", 5)) { /* a new response (after a 100 Continue) */
        long st = 0;
        const char *sp = memchr(buf, ' ', n);
        if (sp) st = strtol(sp + 1, NULL, 10);
        x->r->status = st;
    } else if (n > 5 && !strncasecmp(buf, "etag:", 5)) {
        const char *v = buf + 5;
        size_t l = n - 5;
        while (l && (*v == ' ' || *v == '"')) v++, l--;
        while (l && (v[l - 1] == '\r' || v[l - 1] == '\n' || v[l - 1] == '"' || v[l - 1] == ' ')) l--;
        snprintf(x->r->etag, sizeof(x->r->etag), "%.*s", (int)l, v);
    } else if (n > 15 && !strncasecmp(buf, "content-length:", 15)) {
        x->r->length = strtoull(buf + 15, NULL, 10);
    }
    return n;
}

static void amz_now(char out[17])
{
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm);
}

static int retryable(long status) { return status == 500 || status == 502 || status == 503 || status == 504 || status == 429; }

/* s3://bucket/key for messages. */
static void where(const mr_s3 *s, const char *key, char *out, size_t n)
{
    snprintf(out, n, "s3://%s/%s", s->bucket, key ? key : "");
}

/* Sends r (retrying as described), success being 2xx. */
static mr_status send_req(mr_s3 *s, req *r, mr_error *err)
{
    char loc[1200];
    where(s, r->key ? r->key : r->name, loc, sizeof(loc));
    mr_buf path, url, auth, query;
    mr_buf_init(&path);
    mr_buf_init(&url);
    mr_buf_init(&auth);
    mr_buf_init(&query);
    mr_status rc = MR_OK;
    if (s->path_style) {
        rc = mr_buf_puts(&path, "/");
        if (rc == MR_OK) rc = mr_s3_uri_encode(s->bucket, 0, &path);
        if (rc == MR_OK && r->key) rc = mr_buf_puts(&path, "/");
    } else {
        rc = mr_buf_puts(&path, "/");
    }
    if (rc == MR_OK && r->key) rc = mr_s3_uri_encode(r->key, 1, &path);
    if (rc != MR_OK) return MR_ERR(err, MR_E_NOMEM, "out of memory");
    xfer x = {.r = r};
    mr_buf_init(&x.errbody);
    for (int attempt = 0;; attempt++) {
        char date[17];
        amz_now(date);
        auth.len = query.len = url.len = 0;
        const char *sha = r->body_sha256 ? r->body_sha256 : EMPTY_SHA256;
        /* headers as signed: the caller's with "name:value" */
        mr_sigv4_request sr = {.method = r->method, .host = s->host, .path = path.data, .query = r->query,
                               .n_query = r->n_query, .headers = r->headers, .n_headers = r->n_headers,
                               .payload_sha256 = sha, .sign_payload_header = 1, .amz_date = date,
                               .region = s->region, .service = "s3", .access_key = s->cred.access_key,
                               .secret_key = s->cred.secret_key, .session_token = s->cred.session_token};
        rc = mr_sigv4_sign(&sr, &auth, &query);
        if (rc == MR_OK)
            rc = mr_buf_printf(&url, "%s%s%s%s", s->base, path.data, query.len ? "?" : "", query.len ? query.data : "");
        if (rc != MR_OK) {
            rc = MR_ERR(err, rc == MR_E_NOMEM ? MR_E_NOMEM : MR_E_INVALID_ARG, "%s: cannot sign the request", loc);
            break;
        }
        struct curl_slist *hl = NULL;
        char line[4700];
        snprintf(line, sizeof(line), "Host: %s", s->host);
        hl = curl_slist_append(hl, line);
        snprintf(line, sizeof(line), "x-amz-date: %s", date);
        hl = curl_slist_append(hl, line);
        snprintf(line, sizeof(line), "x-amz-content-sha256: %s", sha);
        hl = curl_slist_append(hl, line);
        if (s->cred.session_token[0]) {
            snprintf(line, sizeof(line), "x-amz-security-token: %s", s->cred.session_token);
            hl = curl_slist_append(hl, line);
        }
        for (size_t i = 0; i < r->n_headers; i++) hl = curl_slist_append(hl, r->headers[i]);
        hl = curl_slist_append(hl, "Expect:"); /* no 100-continue round trip */
        snprintf(line, sizeof(line), "Authorization: %s", auth.data);
        hl = curl_slist_append(hl, line);
        OPENSSL_cleanse(line, sizeof(line));
        CURL *c = s->curl;
        curl_easy_reset(c);
        curl_easy_setopt(c, CURLOPT_URL, url.data);
        curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, s->connect_timeout_ms);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L); /* no progress for timeout_ms: give up */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, (s->timeout_ms + 999) / 1000);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &x);
        curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(c, CURLOPT_HEADERDATA, &x);
        if (!strcmp(r->method, "HEAD")) curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
        else if (!strcmp(r->method, "PUT") || !strcmp(r->method, "POST")) {
            if (!strcmp(r->method, "PUT")) curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
            else curl_easy_setopt(c, CURLOPT_POST, 1L);
            curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(c, CURLOPT_READDATA, &x);
            if (!strcmp(r->method, "PUT")) curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
            else curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
        } else if (strcmp(r->method, "GET")) {
            curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, r->method);
        }
        x.sent = 0;
        x.errbody.len = 0;
        x.write_failed = 0;
        r->status = 0;
        r->etag[0] = 0;
        if (r->resp) r->resp->len = 0;
        if (r->resp_fd >= 0 && (ftruncate(r->resp_fd, 0) != 0 || lseek(r->resp_fd, 0, SEEK_SET) != 0)) {
            curl_slist_free_all(hl);
            rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot rewrite the download", loc);
            break;
        }
        s->stats.requests++;
        CURLcode cc = curl_easy_perform(c);
        curl_slist_free_all(hl);
        long status = 0;
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
        r->status = status;
        if (cc == CURLE_OK && status >= 200 && status < 300) {
            s->stats.bytes_up += x.sent;
            s->stats.bytes_down += r->resp ? r->resp->len : r->length;
            rc = MR_OK;
            break;
        }
        if (x.write_failed) {
            rc = x.write_failed == ENOMEM ? MR_ERR(err, MR_E_NOMEM, "out of memory reading %s", loc)
                                          : MR_ERR_SYS(err, MR_E_IO, x.write_failed, "%s: cannot write the download", loc);
            break;
        }
        int again = cc != CURLE_OK || retryable(status);
        if (again && attempt < s->retries) {
            s->stats.retries++;
            /* full jitter: uniform in [0, min(cap, base * 2^attempt)) */
            double cap = 100e-3 * (double)(1u << (attempt < 6 ? attempt : 6));
            if (cap > 5.0) cap = 5.0;
            double wait = mr_rng_uniform(&s->rng) * cap;
            struct timespec ts = {(time_t)wait, (long)((wait - (double)(time_t)wait) * 1e9)};
            nanosleep(&ts, NULL);
            continue;
        }
        if (cc != CURLE_OK) {
            rc = MR_ERR(err, MR_E_IO, "%s: %s (%s)%s", loc, curl_easy_strerror(cc), s->base,
                        attempt ? ", after retries" : "");
            break;
        }
        /* the service's answer: <Error><Code>..</Code><Message>..</Message></Error> */
        static const char *const names[] = {"Code", "Message"};
        mr_buf vals[2];
        mr_buf_init(&vals[0]);
        mr_buf_init(&vals[1]);
        if (x.errbody.len) (void)xml_parse(x.errbody.data, x.errbody.len, names, 2, vals, NULL, NULL);
        const char *code = vals[0].len ? vals[0].data : status == 404 ? "NotFound" : status == 403 ? "Forbidden" : "";
        const char *msg = vals[1].len ? vals[1].data : "";
        mr_status st = status == 404 ? MR_E_NOT_FOUND : status == 403 ? MR_E_STATE : MR_E_IO;
        rc = MR_ERR(err, st, "%s: HTTP %ld %s%s%s", loc, status, code, msg[0] ? ": " : "", msg);
        if (!strcmp(code, "SignatureDoesNotMatch") || !strcmp(code, "InvalidAccessKeyId"))
            mr_error_hint(err, "check the key and secret (from %s) and the region (%s)", s->cred.source, s->region);
        else if (!strcmp(code, "NoSuchBucket"))
            mr_error_hint(err, "the bucket '%s' does not exist at %s", s->bucket, s->base);
        mr_buf_free(&vals[0]);
        mr_buf_free(&vals[1]);
        break;
    }
    mr_buf_free(&x.errbody);
    mr_buf_free(&path);
    mr_buf_free(&url);
    OPENSSL_cleanse(auth.data ? auth.data : (char *)"", auth.data ? auth.len : 0);
    mr_buf_free(&auth);
    mr_buf_free(&query);
    return rc;
}

static void req_init(req *r, const char *method, const char *key)
{
    memset(r, 0, sizeof(*r));
    r->method = method;
    r->key = key;
    r->body_fd = -1;
    r->resp_fd = -1;
}

/* ---- objects ---------------------------------------------------------------------------- */

mr_status mr_s3_put(mr_s3 *s, const char *key, const void *data, size_t n, mr_error *err)
{
    char sha[65];
    mr_sha256_hex(data, n, sha);
    req r;
    req_init(&r, "PUT", key);
    r.body = data;
    r.body_len = n;
    r.body_sha256 = sha;
    return send_req(s, &r, err);
}

/* The hex SHA-256 of the file region [off, off + len). */
static mr_status sha_of_region(int fd, uint64_t off, uint64_t len, char hex[65], const char *path, mr_error *err)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    char *buf = mr_malloc(1 << 20);
    mr_status rc = ctx && buf && EVP_DigestInit_ex(ctx, EVP_sha256(), NULL) ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (uint64_t done = 0; rc == MR_OK && done < len;) {
        size_t want = len - done < (1 << 20) ? (size_t)(len - done) : (1 << 20);
        ssize_t got = pread(fd, buf, want, (off_t)(off + done));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) rc = MR_ERR_SYS(err, MR_E_IO, got < 0 ? errno : EIO, "%s: cannot read", path);
        else {
            EVP_DigestUpdate(ctx, buf, (size_t)got);
            done += (uint64_t)got;
        }
    }
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;
    if (rc == MR_OK) {
        EVP_DigestFinal_ex(ctx, md, &ml);
        static const char digits[] = "0123456789abcdef";
        for (unsigned i = 0; i < 32; i++) {
            hex[2 * i] = digits[md[i] >> 4];
            hex[2 * i + 1] = digits[md[i] & 15];
        }
        hex[64] = 0;
    }
    EVP_MD_CTX_free(ctx);
    mr_free(buf);
    return rc;
}

static mr_status put_region(mr_s3 *s, const char *key, const char *const *query, size_t n_query, int fd, uint64_t off,
                            uint64_t len, const char *path, char *etag, mr_error *err)
{
    char sha[65];
    mr_status rc = sha_of_region(fd, off, len, sha, path, err);
    if (rc != MR_OK) return rc;
    req r;
    req_init(&r, "PUT", key);
    r.query = query;
    r.n_query = n_query;
    r.body_fd = fd;
    r.body_off = off;
    r.body_len = len;
    r.body_sha256 = sha;
    rc = send_req(s, &r, err);
    if (rc == MR_OK && etag) snprintf(etag, 128, "%s", r.etag);
    return rc;
}

static mr_status multipart(mr_s3 *s, const char *key, int fd, uint64_t size, const char *path, mr_error *err)
{
    /* create */
    static const char *const create_q[] = {"uploads", ""};
    mr_buf resp, body;
    mr_buf_init(&resp);
    mr_buf_init(&body);
    req r;
    req_init(&r, "POST", key);
    r.query = create_q;
    r.n_query = 1;
    r.resp = &resp;
    r.body = "";
    mr_status rc = send_req(s, &r, err);
    static const char *const names[] = {"UploadId"};
    mr_buf id;
    mr_buf_init(&id);
    if (rc == MR_OK && (xml_parse(resp.data, resp.len, names, 1, &id, NULL, NULL) || !id.len)) {
        char loc[1200];
        where(s, key, loc, sizeof(loc));
        rc = MR_ERR(err, MR_E_CORRUPT, "%s: the service answered no UploadId to CreateMultipartUpload", loc);
    }
    /* the parts, then the list of their ETags */
    uint64_t part = s->multipart_bytes;
    size_t n_parts = (size_t)((size + part - 1) / part);
    if (rc == MR_OK) rc = mr_buf_puts(&body, "<CompleteMultipartUpload>") == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    for (size_t i = 0; rc == MR_OK && i < n_parts; i++) {
        char num[24], etag[128];
        snprintf(num, sizeof(num), "%zu", i + 1);
        const char *q[] = {"partNumber", num, "uploadId", id.data};
        uint64_t off = (uint64_t)i * part, len = size - off < part ? size - off : part;
        rc = put_region(s, key, q, 2, fd, off, len, path, etag, err);
        if (rc == MR_OK)
            rc = mr_buf_printf(&body, "<Part><PartNumber>%zu</PartNumber><ETag>\"%s\"</ETag></Part>", i + 1, etag) == MR_OK
                     ? MR_OK
                     : MR_ERR(err, MR_E_NOMEM, "out of memory");
    }
    if (rc == MR_OK) rc = mr_buf_puts(&body, "</CompleteMultipartUpload>") == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
    if (rc == MR_OK) {
        const char *q[] = {"uploadId", id.data};
        char sha[65];
        mr_sha256_hex(body.data, body.len, sha);
        req_init(&r, "POST", key);
        r.query = q;
        r.n_query = 1;
        r.body = body.data;
        r.body_len = body.len;
        r.body_sha256 = sha;
        r.resp = &resp;
        rc = send_req(s, &r, err);
        /* a 200 may still carry an <Error> (S3 says so for CompleteMultipartUpload) */
        static const char *const en[] = {"Code"};
        mr_buf code;
        mr_buf_init(&code);
        if (rc == MR_OK && resp.len && !xml_parse(resp.data, resp.len, en, 1, &code, NULL, NULL) && code.len) {
            char loc[1200];
            where(s, key, loc, sizeof(loc));
            rc = MR_ERR(err, MR_E_IO, "%s: CompleteMultipartUpload failed: %s", loc, code.data);
        }
        mr_buf_free(&code);
    }
    if (rc != MR_OK && id.len) { /* abort, best effort: the parts are not left to bill */
        const char *q[] = {"uploadId", id.data};
        req_init(&r, "DELETE", key);
        r.query = q;
        r.n_query = 1;
        (void)send_req(s, &r, NULL);
    }
    mr_buf_free(&id);
    mr_buf_free(&resp);
    mr_buf_free(&body);
    return rc;
}

mr_status mr_s3_put_file(mr_s3 *s, const char *key, const char *path, mr_error *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot open", path);
    struct stat st;
    mr_status rc = fstat(fd, &st) == 0 ? MR_OK : MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot stat", path);
    if (rc == MR_OK) {
        uint64_t size = (uint64_t)st.st_size;
        rc = size > s->multipart_bytes ? multipart(s, key, fd, size, path, err)
                                       : put_region(s, key, NULL, 0, fd, 0, size, path, NULL, err);
    }
    close(fd);
    return rc;
}

/* The object (or a range of it) as the version etag names when etag is
 * not NULL: sent as If-Match, and the response's ETag checked too (a
 * service may ignore the condition). */
static mr_status get_common(mr_s3 *s, const char *key, uint64_t off, uint64_t len, const char *etag, mr_buf *out,
                            int fd, mr_error *err)
{
    char range[80], match[160];
    const char *hs[2];
    size_t nh = 0;
    req r;
    req_init(&r, "GET", key);
    if (off || len) {
        if (len) snprintf(range, sizeof(range), "range:bytes=%llu-%llu", (unsigned long long)off,
                          (unsigned long long)(off + len - 1));
        else snprintf(range, sizeof(range), "range:bytes=%llu-", (unsigned long long)off);
        hs[nh++] = range;
    }
    if (etag && *etag) {
        snprintf(match, sizeof(match), "if-match:\"%s\"", etag);
        hs[nh++] = match;
    }
    r.headers = hs;
    r.n_headers = nh;
    mr_buf tmp;
    mr_buf_init(&tmp);
    if (fd >= 0) r.resp_fd = fd;
    else r.resp = &tmp;
    mr_status rc = send_req(s, &r, err);
    if (rc == MR_OK && etag && *etag && strcmp(r.etag, etag)) {
        char loc[1200];
        where(s, key, loc, sizeof(loc));
        rc = MR_ERR(err, MR_E_STATE, "%s changed while it was read (ETag %s, listed as %s)", loc, r.etag, etag);
        mr_error_hint(err, "run again: the new version is listed and read from the start");
    } else if (rc != MR_OK && r.status == 412) {
        mr_error_clear(err);
        char loc[1200];
        where(s, key, loc, sizeof(loc));
        rc = MR_ERR(err, MR_E_STATE, "%s changed while it was read (no longer ETag %s)", loc, etag);
        mr_error_hint(err, "run again: the new version is listed and read from the start");
    }
    if (fd >= 0) {
        /* written to the file */
    } else if (rc == MR_OK && r.status == 200 && (off || len)) {
        /* a service that ignored the range: cut the part asked for */
        uint64_t e = len && off + len < tmp.len ? off + len : tmp.len;
        rc = off < tmp.len ? mr_buf_append(out, tmp.data + off, (size_t)(e - off)) : MR_OK;
    } else if (rc == MR_OK && tmp.len) {
        rc = mr_buf_append(out, tmp.data, tmp.len);
    }
    if (rc == MR_E_NOMEM || rc == MR_E_LIMIT) rc = MR_ERR(err, rc, "out of memory reading s3://%s/%s", s->bucket, key);
    mr_buf_free(&tmp);
    return rc;
}

mr_status mr_s3_get(mr_s3 *s, const char *key, uint64_t off, uint64_t len, mr_buf *out, mr_error *err)
{
    return get_common(s, key, off, len, NULL, out, -1, err);
}

mr_status mr_s3_get_version(mr_s3 *s, const char *key, const char *etag, uint64_t off, uint64_t len, mr_buf *out,
                            mr_error *err)
{
    return get_common(s, key, off, len, etag, out, -1, err);
}

mr_status mr_s3_get_file(mr_s3 *s, const char *key, const char *path, mr_error *err)
{
    return mr_s3_get_file_version(s, key, NULL, path, err);
}

mr_status mr_s3_get_file_version(mr_s3 *s, const char *key, const char *etag, const char *path, mr_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) return MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot create", path);
    mr_status rc = get_common(s, key, 0, 0, etag, NULL, fd, err);
    if (rc == MR_OK && fsync(fd) != 0) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot sync", path);
    if (close(fd) != 0 && rc == MR_OK) rc = MR_ERR_SYS(err, MR_E_IO, errno, "%s: cannot close", path);
    if (rc != MR_OK) (void)unlink(path);
    return rc;
}

mr_status mr_s3_head(mr_s3 *s, const char *key, uint64_t *size, char *etag, mr_error *err)
{
    req r;
    req_init(&r, "HEAD", key);
    mr_status rc = send_req(s, &r, err);
    if (rc == MR_OK) {
        if (size) *size = r.length;
        if (etag) snprintf(etag, 128, "%s", r.etag);
    }
    return rc;
}

mr_status mr_s3_delete(mr_s3 *s, const char *key, mr_error *err)
{
    req r;
    req_init(&r, "DELETE", key);
    mr_error e;
    mr_error_init(&e);
    mr_status rc = send_req(s, &r, &e);
    if (rc == MR_E_NOT_FOUND && r.status == 404) return MR_OK; /* gone already */
    if (rc != MR_OK && err) *err = e;
    return rc;
}

/* ---- listing ------------------------------------------------------------------------------ */

typedef struct list_state {
    mr_s3_list_fn fn;
    mr_s3_list_etag_fn efn;
    void *arg;
    char key[1100];
    char etag[160];
    int have_key, stopped;
    uint64_t count;
} list_state;

static void on_list_elem(void *arg, const char *name, const char *text)
{
    list_state *ls = arg;
    if (ls->stopped) return;
    if (!strcmp(name, "Key")) {
        snprintf(ls->key, sizeof(ls->key), "%s", text);
        ls->etag[0] = 0;
        ls->have_key = 1;
    } else if (!strcmp(name, "ETag") && ls->have_key) { /* Key, LastModified, ETag, Size in <Contents> */
        size_t n = strlen(text);
        if (n >= 2 && text[0] == '"' && text[n - 1] == '"') snprintf(ls->etag, sizeof(ls->etag), "%.*s", (int)(n - 2), text + 1);
        else snprintf(ls->etag, sizeof(ls->etag), "%s", text);
    } else if (!strcmp(name, "Size") && ls->have_key) { /* Size follows Key within <Contents> */
        ls->have_key = 0;
        ls->count++;
        uint64_t size = strtoull(text, NULL, 10);
        if (ls->efn ? ls->efn(ls->arg, ls->key, size, ls->etag) : ls->fn(ls->arg, ls->key, size)) ls->stopped = 1;
    }
}

static mr_status list_common(mr_s3 *s, const char *prefix, list_state ls, mr_error *err);

mr_status mr_s3_list(mr_s3 *s, const char *prefix, mr_s3_list_fn fn, void *arg, mr_error *err)
{
    return list_common(s, prefix, (list_state){.fn = fn, .arg = arg}, err);
}

mr_status mr_s3_list_etags(mr_s3 *s, const char *prefix, mr_s3_list_etag_fn fn, void *arg, mr_error *err)
{
    return list_common(s, prefix, (list_state){.efn = fn, .arg = arg}, err);
}

static mr_status list_common(mr_s3 *s, const char *prefix, list_state ls, mr_error *err)
{
    mr_buf token, resp;
    mr_buf_init(&token);
    mr_buf_init(&resp);
    mr_status rc = MR_OK;
    static const char *const names[] = {"Key", "Size", "IsTruncated", "NextContinuationToken"};
    for (;;) {
        const char *q[8] = {"list-type", "2", "prefix", prefix ? prefix : "", "max-keys", "1000", NULL, NULL};
        size_t nq = 3;
        if (token.len) {
            q[6] = "continuation-token";
            q[7] = token.data;
            nq = 4;
        }
        req r;
        req_init(&r, "GET", NULL);
        r.name = prefix;
        r.query = q;
        r.n_query = nq;
        r.resp = &resp;
        rc = send_req(s, &r, err);
        if (rc != MR_OK) break;
        mr_buf vals[4];
        for (int i = 0; i < 4; i++) mr_buf_init(&vals[i]);
        if (xml_parse(resp.data, resp.len, names, 4, vals, on_list_elem, &ls)) {
            rc = MR_ERR(err, MR_E_CORRUPT, "s3://%s/%s: the listing is not XML", s->bucket, prefix ? prefix : "");
        } else if (ls.stopped) {
            rc = MR_E_INTERRUPTED;
        } else if (vals[2].len && !strcmp(vals[2].data, "true")) {
            if (!vals[3].len) rc = MR_ERR(err, MR_E_CORRUPT, "s3://%s: a truncated listing without a continuation token", s->bucket);
            else {
                token.len = 0;
                rc = mr_buf_append(&token, vals[3].data, vals[3].len) == MR_OK ? MR_OK : MR_ERR(err, MR_E_NOMEM, "out of memory");
            }
        } else {
            for (int i = 0; i < 4; i++) mr_buf_free(&vals[i]);
            break;
        }
        for (int i = 0; i < 4; i++) mr_buf_free(&vals[i]);
        if (rc != MR_OK) break;
    }
    mr_buf_free(&token);
    mr_buf_free(&resp);
    return rc;
}
