/* AWS Signature Version 4 (include/millrace/s3.h): the canonical request,
 * the string to sign, the derived signing key and the Authorization header.
 * SHA-256 and HMAC come from OpenSSL's libcrypto. */
#include "millrace/s3.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

static void hex_of(const unsigned char *d, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[d[i] >> 4];
        out[2 * i + 1] = digits[d[i] & 15];
    }
    out[2 * n] = 0;
}

void mr_sha256_hex(const void *p, size_t n, char hex[65])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
    hex_of(md, 32, hex);
}

static void hmac(const void *key, size_t klen, const char *msg, unsigned char out[32])
{
    unsigned int len = 32;
    HMAC(EVP_sha256(), key, (int)klen, (const unsigned char *)msg, strlen(msg), out, &len);
}

mr_status mr_s3_uri_encode(const char *s, int keep_slash, mr_buf *out)
{
    static const char digits[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        int keep = isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~' || (keep_slash && *p == '/');
        char e[3] = {'%', digits[*p >> 4], digits[*p & 15]};
        mr_status rc = keep ? mr_buf_append(out, p, 1) : mr_buf_append(out, e, 3);
        if (rc != MR_OK) return rc;
    }
    return MR_OK;
}

/* "name:value" split, the name lower-cased and the value trimmed, its inner runs of spaces made one. */
typedef struct hdr {
    char *name, *value;
} hdr;

static int hdr_cmp(const void *a, const void *b) { return strcmp(((const hdr *)a)->name, ((const hdr *)b)->name); }

static int hdr_parse(const char *text, hdr *h)
{
    const char *colon = strchr(text, ':');
    if (!colon || colon == text) return -1;
    size_t nl = (size_t)(colon - text);
    h->name = mr_malloc(nl + 1);
    h->value = mr_malloc(strlen(colon + 1) + 1);
    if (!h->name || !h->value) return -1;
    for (size_t i = 0; i < nl; i++) h->name[i] = (char)tolower((unsigned char)text[i]);
    h->name[nl] = 0;
    const char *v = colon + 1;
    while (*v == ' ' || *v == '\t') v++;
    size_t o = 0;
    for (; *v; v++) {
        if ((*v == ' ' || *v == '\t') && (o == 0 || h->value[o - 1] == ' ')) continue;
        h->value[o++] = *v == '\t' ? ' ' : *v;
    }
    while (o && h->value[o - 1] == ' ') o--;
    h->value[o] = 0;
    return 0;
}

typedef struct qp {
    char *k, *v; /* encoded */
} qp;

static int qp_cmp(const void *a, const void *b)
{
    const qp *x = a, *y = b;
    int c = strcmp(x->k, y->k);
    return c ? c : strcmp(x->v, y->v);
}

mr_status mr_sigv4_sign(const mr_sigv4_request *r, mr_buf *auth, mr_buf *query)
{
    if (!r->method || !r->host || !r->path || !r->payload_sha256 || !r->amz_date || strlen(r->amz_date) != 16 ||
        !r->region || !r->service || !r->access_key || !r->secret_key)
        return MR_E_INVALID_ARG;
    mr_status rc = MR_OK;
    size_t nh = r->n_headers + 4;
    hdr *hs = mr_calloc(nh, sizeof(*hs));
    qp *qs = mr_calloc(r->n_query ? r->n_query : 1, sizeof(*qs));
    mr_buf creq, sts, tmp;
    mr_buf_init(&creq);
    mr_buf_init(&sts);
    mr_buf_init(&tmp);
    if (!hs || !qs) rc = MR_E_NOMEM;
    /* the query: each name and value encoded, sorted */
    for (size_t i = 0; rc == MR_OK && i < r->n_query; i++) {
        mr_buf k, v;
        mr_buf_init(&k);
        mr_buf_init(&v);
        rc = mr_s3_uri_encode(r->query[2 * i], 0, &k);
        if (rc == MR_OK) rc = mr_s3_uri_encode(r->query[2 * i + 1] ? r->query[2 * i + 1] : "", 0, &v);
        if (rc == MR_OK) rc = mr_buf_append(&k, "", 1) == MR_OK && mr_buf_append(&v, "", 1) == MR_OK ? MR_OK : MR_E_NOMEM;
        qs[i].k = k.data;
        qs[i].v = v.data;
        if (rc != MR_OK) break;
    }
    if (rc == MR_OK) qsort(qs, r->n_query, sizeof(*qs), qp_cmp);
    for (size_t i = 0; rc == MR_OK && i < r->n_query; i++)
        rc = mr_buf_printf(query, "%s%s=%s", i ? "&" : "", qs[i].k ? qs[i].k : "", qs[i].v ? qs[i].v : "");
    /* the headers: host, the date, the payload hash and token when signed, and the caller's */
    size_t n = 0;
    char line[4608];
    snprintf(line, sizeof(line), "host:%s", r->host);
    if (rc == MR_OK && hdr_parse(line, &hs[n++])) rc = MR_E_NOMEM;
    snprintf(line, sizeof(line), "x-amz-date:%s", r->amz_date);
    if (rc == MR_OK && hdr_parse(line, &hs[n++])) rc = MR_E_NOMEM;
    if (r->sign_payload_header) {
        snprintf(line, sizeof(line), "x-amz-content-sha256:%s", r->payload_sha256);
        if (rc == MR_OK && hdr_parse(line, &hs[n++])) rc = MR_E_NOMEM;
    }
    if (r->session_token && r->session_token[0]) {
        snprintf(line, sizeof(line), "x-amz-security-token:%s", r->session_token);
        if (rc == MR_OK && hdr_parse(line, &hs[n++])) rc = MR_E_NOMEM;
    }
    for (size_t i = 0; rc == MR_OK && i < r->n_headers; i++)
        if (hdr_parse(r->headers[i], &hs[n++])) rc = MR_E_INVALID_ARG;
    if (rc == MR_OK) qsort(hs, n, sizeof(*hs), hdr_cmp);
    /* the canonical request */
    if (rc == MR_OK) rc = mr_buf_printf(&creq, "%s\n%s\n%s\n", r->method, r->path, query->data ? query->data : "");
    for (size_t i = 0; rc == MR_OK && i < n; i++) rc = mr_buf_printf(&creq, "%s:%s\n", hs[i].name, hs[i].value);
    if (rc == MR_OK) rc = mr_buf_puts(&creq, "\n");
    for (size_t i = 0; rc == MR_OK && i < n; i++) rc = mr_buf_printf(&tmp, "%s%s", i ? ";" : "", hs[i].name);
    if (rc == MR_OK) rc = mr_buf_printf(&creq, "%s\n%s", tmp.data, r->payload_sha256);
    /* the string to sign, the signing key, the signature */
    char date[9], creq_hash[65], sig[65];
    memcpy(date, r->amz_date, 8);
    date[8] = 0;
    if (rc == MR_OK) {
        mr_sha256_hex(creq.data, creq.len, creq_hash);
        rc = mr_buf_printf(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", r->amz_date, date, r->region,
                           r->service, creq_hash);
    }
    if (rc == MR_OK) {
        char k0[300];
        snprintf(k0, sizeof(k0), "AWS4%s", r->secret_key);
        unsigned char k1[32], k2[32], k3[32], k4[32], s[32];
        hmac(k0, strlen(k0), date, k1);
        hmac(k1, 32, r->region, k2);
        hmac(k2, 32, r->service, k3);
        hmac(k3, 32, "aws4_request", k4);
        hmac(k4, 32, sts.data, s);
        hex_of(s, 32, sig);
        OPENSSL_cleanse(k0, sizeof(k0));
        OPENSSL_cleanse(k4, sizeof(k4));
        rc = mr_buf_printf(auth, "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request,SignedHeaders=%s,Signature=%s",
                           r->access_key, date, r->region, r->service, tmp.data, sig);
    }
    for (size_t i = 0; hs && i < nh; i++) {
        mr_free(hs[i].name);
        mr_free(hs[i].value);
    }
    for (size_t i = 0; qs && i < r->n_query; i++) {
        mr_free(qs[i].k);
        mr_free(qs[i].v);
    }
    mr_free(hs);
    mr_free(qs);
    mr_buf_free(&creq);
    mr_buf_free(&sts);
    mr_buf_free(&tmp);
    return rc;
}
