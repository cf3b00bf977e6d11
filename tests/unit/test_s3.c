/* Unit tests for the S3 client's offline parts (src/core/s3*.c): SigV4
 * against AWS's published examples (the four S3 examples of "Signature
 * Calculations for the Authorization Header" and the test suite's
 * get-vanilla-query-order-key-case), URI encoding, s3:// URLs, credentials
 * from the environment and the shared files with profiles, and the client
 * facing a port nobody listens on and a server that drops the connection
 * mid-response (retried, then a clear error, nothing left half-written).
 * The client against a real S3 server: tests/e2e/test_s3_client.sh. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "millrace/s3.h"

#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static void check_sig(const mr_sigv4_request *r, const char *want_sig, const char *want_query)
{
    mr_buf auth, query;
    mr_buf_init(&auth);
    mr_buf_init(&query);
    assert_ok(mr_sigv4_sign(r, &auth, &query));
    const char *sig = strstr(auth.data, "Signature=");
    assert_non_null(sig);
    assert_string_equal(sig + 10, want_sig);
    assert_string_equal(query.len ? query.data : "", want_query);
    mr_buf_free(&auth);
    mr_buf_free(&query);
}

static void test_sigv4_vectors(void **state)
{
    (void)state;
    const char *ak = "AKIAIOSFODNN7EXAMPLE", *sk = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY";
    /* GET Object, the first 10 bytes */
    const char *range[] = {"Range: bytes=0-9"};
    mr_sigv4_request get = {.method = "GET", .host = "examplebucket.s3.amazonaws.com", .path = "/test.txt",
                            .headers = range, .n_headers = 1, .payload_sha256 = EMPTY, .sign_payload_header = 1,
                            .amz_date = "20130524T000000Z", .region = "us-east-1", .service = "s3",
                            .access_key = ak, .secret_key = sk};
    check_sig(&get, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41", "");
    /* PUT Object "test$file.text", a storage class, the body's hash */
    char body_sha[65];
    mr_sha256_hex("Welcome to Amazon S3.", 21, body_sha);
    assert_string_equal(body_sha, "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072");
    mr_buf path;
    mr_buf_init(&path);
    assert_ok(mr_buf_puts(&path, "/"));
    assert_ok(mr_s3_uri_encode("test$file.text", 1, &path));
    assert_string_equal(path.data, "/test%24file.text");
    const char *put_h[] = {"Date: Fri, 24 May 2013 00:00:00 GMT", "x-amz-storage-class:  REDUCED_REDUNDANCY "};
    mr_sigv4_request put = get;
    put.method = "PUT";
    put.path = path.data;
    put.headers = put_h;
    put.n_headers = 2;
    put.payload_sha256 = body_sha;
    check_sig(&put, "98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd", "");
    mr_buf_free(&path);
    /* GET Bucket Lifecycle: a query parameter without a value */
    const char *lq[] = {"lifecycle", ""};
    mr_sigv4_request lc = get;
    lc.path = "/";
    lc.headers = NULL;
    lc.n_headers = 0;
    lc.query = lq;
    lc.n_query = 1;
    check_sig(&lc, "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543", "lifecycle=");
    /* List Objects: parameters given out of order are sorted */
    const char *list_q[] = {"prefix", "J", "max-keys", "2"};
    mr_sigv4_request ls = lc;
    ls.query = list_q;
    ls.n_query = 2;
    check_sig(&ls, "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7", "max-keys=2&prefix=J");
    /* the generic test suite: another service, no payload header */
    const char *vq[] = {"Param2", "value2", "Param1", "value1"};
    mr_sigv4_request v = {.method = "GET", .host = "example.amazonaws.com", .path = "/", .query = vq, .n_query = 2,
                          .payload_sha256 = EMPTY, .amz_date = "20150830T123600Z", .region = "us-east-1",
                          .service = "service", .access_key = "AKIDEXAMPLE",
                          .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"};
    check_sig(&v, "b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500", "Param1=value1&Param2=value2");
    /* a session token is signed: the signature changes */
    mr_buf a1, a2, q;
    mr_buf_init(&a1);
    mr_buf_init(&a2);
    mr_buf_init(&q);
    assert_ok(mr_sigv4_sign(&get, &a1, &q));
    get.session_token = "token";
    q.len = 0;
    assert_ok(mr_sigv4_sign(&get, &a2, &q));
    assert_non_null(strstr(a2.data, "x-amz-security-token"));
    assert_string_not_equal(a1.data, a2.data);
    mr_buf_free(&a1);
    mr_buf_free(&a2);
    mr_buf_free(&q);
    /* a request missing a part */
    mr_sigv4_request bad = get;
    bad.amz_date = "2013";
    mr_buf_init(&a1);
    mr_buf_init(&q);
    assert_status(mr_sigv4_sign(&bad, &a1, &q), MR_E_INVALID_ARG);
    mr_buf_free(&a1);
    mr_buf_free(&q);
}

static void test_encoding_and_urls(void **state)
{
    (void)state;
    mr_buf b;
    mr_buf_init(&b);
    assert_ok(mr_s3_uri_encode("a b/c~d_e.f-g+h=i&j\xc3\xa9", 1, &b));
    assert_string_equal(b.data, "a%20b/c~d_e.f-g%2Bh%3Di%26j%C3%A9");
    b.len = 0;
    assert_ok(mr_s3_uri_encode("x/y", 0, &b));
    assert_string_equal(b.data, "x%2Fy");
    mr_buf_free(&b);
    char bucket[64], prefix[256];
    assert_ok(mr_s3_parse_url("s3://my-bucket/runs/cache/", bucket, sizeof(bucket), prefix, sizeof(prefix), NULL));
    assert_string_equal(bucket, "my-bucket");
    assert_string_equal(prefix, "runs/cache");
    assert_ok(mr_s3_parse_url("s3://abc", bucket, sizeof(bucket), prefix, sizeof(prefix), NULL));
    assert_string_equal(prefix, "");
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_s3_parse_url("http://x/y", bucket, sizeof(bucket), prefix, sizeof(prefix), &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "expected s3://BUCKET"));
    mr_error_init(&err);
    assert_status(mr_s3_parse_url("s3://Bad_Bucket/x", bucket, sizeof(bucket), prefix, sizeof(prefix), &err),
                  MR_E_INVALID_ARG);
    assert_status(mr_s3_parse_url("s3://ab", bucket, sizeof(bucket), prefix, sizeof(prefix), NULL), MR_E_INVALID_ARG);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_credentials(void **state)
{
    (void)state;
    char dir[4096], cred[4200], conf[4200];
    snprintf(dir, sizeof(dir), "%s/s3-creds-XXXXXX", mr_test_tmpdir());
    assert_non_null(mkdtemp(dir));
    snprintf(cred, sizeof(cred), "%s/credentials", dir);
    snprintf(conf, sizeof(conf), "%s/config", dir);
    write_file(cred, "# comment\n[default]\naws_access_key_id = AKDEF\naws_secret_access_key=SECDEF\n\n"
                     "[ci]\naws_access_key_id = AKCI\naws_secret_access_key = SECCI\naws_session_token = TOK\n");
    write_file(conf, "[default]\nregion = eu-west-1\n[profile ci]\nregion = ap-south-1\n"
                     "[profile onlyconf]\naws_access_key_id = AKCONF\naws_secret_access_key = SECCONF\n");
    setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
    setenv("AWS_CONFIG_FILE", conf, 1);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_REGION");
    unsetenv("AWS_DEFAULT_REGION");
    mr_s3_credentials c;
    assert_ok(mr_s3_credentials_load(NULL, &c, NULL));
    assert_string_equal(c.access_key, "AKDEF");
    assert_string_equal(c.secret_key, "SECDEF");
    assert_string_equal(c.session_token, "");
    assert_string_equal(c.region, "eu-west-1");
    setenv("AWS_PROFILE", "ci", 1);
    assert_ok(mr_s3_credentials_load(NULL, &c, NULL));
    assert_string_equal(c.access_key, "AKCI");
    assert_string_equal(c.session_token, "TOK");
    assert_string_equal(c.region, "ap-south-1");
    assert_non_null(strstr(c.source, "[ci]"));
    assert_ok(mr_s3_credentials_load("onlyconf", &c, NULL));
    assert_string_equal(c.access_key, "AKCONF");
    assert_string_equal(c.region, "us-east-1");
    /* the environment wins, and its region */
    setenv("AWS_ACCESS_KEY_ID", "AKENV", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SECENV", 1);
    setenv("AWS_REGION", "us-west-2", 1);
    assert_ok(mr_s3_credentials_load(NULL, &c, NULL));
    assert_string_equal(c.access_key, "AKENV");
    assert_string_equal(c.region, "us-west-2");
    assert_string_equal(c.source, "the environment");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_REGION");
    /* none: a hint, and no secret in the message */
    mr_error err;
    mr_error_init(&err);
    assert_status(mr_s3_credentials_load("nosuch", &c, &err), MR_E_NOT_FOUND);
    assert_non_null(strstr(err.msg, "no AWS credentials for profile 'nosuch'"));
    assert_non_null(strstr(err.hint, "AWS_ACCESS_KEY_ID"));
    assert_string_equal(c.access_key, "");
    /* a malformed line, named */
    write_file(cred, "[default]\naws_access_key_id AKDEF\n");
    mr_error_init(&err);
    assert_status(mr_s3_credentials_load("default", &c, &err), MR_E_PARSE);
    assert_int_equal(err.line, 2);
    assert_non_null(strstr(err.file, "credentials"));
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
    unsetenv("AWS_CONFIG_FILE");
    unsetenv("AWS_PROFILE");
    assert_ok(mr_fs_rmtree(dir, NULL));
}

/* A server that answers each connection with the start of a 200 response and hangs up. */
typedef struct dropper {
    int fd, port, conns;
} dropper;

static void *drop_loop(void *arg)
{
    dropper *d = arg;
    for (;;) {
        int c = accept(d->fd, NULL, NULL);
        if (c < 0) break;
        char buf[4096];
        (void)read(c, buf, sizeof(buf));
        const char *resp = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\npartial";
        (void)write(c, resp, strlen(resp));
        close(c);
        d->conns++;
    }
    return NULL;
}

static void test_client_failures(void **state)
{
    (void)state;
    mr_s3_credentials cred;
    memset(&cred, 0, sizeof(cred));
    strcpy(cred.access_key, "AKTEST");
    strcpy(cred.secret_key, "SECRET-NEVER-SHOWN");
    strcpy(cred.region, "us-east-1");
    /* a port nobody listens on: retried, then an error naming the object and the endpoint */
    int probe = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(probe, (struct sockaddr *)&a, sizeof(a)), 0);
    socklen_t al = sizeof(a);
    getsockname(probe, (struct sockaddr *)&a, &al);
    int port = ntohs(a.sin_port);
    close(probe);
    char ep[64];
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", port);
    mr_s3_opts o;
    mr_s3_opts_init(&o);
    o.endpoint = ep;
    o.credentials = &cred;
    o.retries = 2;
    mr_s3 *s = NULL;
    assert_ok(mr_s3_open("bucket", &o, &s, NULL));
    mr_buf b;
    mr_buf_init(&b);
    mr_error err;
    mr_error_init(&err);
    mr_status rc = mr_s3_get(s, "k/x.bin", 0, 0, &b, &err);
    if (!(mr_test_torturing() && rc == MR_E_NOMEM)) {
        assert_status(rc, MR_E_IO);
        assert_non_null(strstr(err.msg, "s3://bucket/k/x.bin"));
        assert_non_null(strstr(err.msg, ep));
        assert_null(strstr(err.msg, "SECRET"));
        mr_s3_stats st;
        mr_s3_get_stats(s, &st);
        assert_int_equal(st.requests, 3);
        assert_int_equal(st.retries, 2);
    }
    mr_s3_close(s);
    /* a server that drops the connection mid-body: retried, an error, no file left */
    dropper d = {.fd = socket(AF_INET, SOCK_STREAM, 0)};
    a.sin_port = 0;
    assert_int_equal(bind(d.fd, (struct sockaddr *)&a, sizeof(a)), 0);
    al = sizeof(a);
    getsockname(d.fd, (struct sockaddr *)&a, &al);
    assert_int_equal(listen(d.fd, 8), 0);
    pthread_t th;
    pthread_create(&th, NULL, drop_loop, &d);
    snprintf(ep, sizeof(ep), "http://127.0.0.1:%d", ntohs(a.sin_port));
    o.endpoint = ep;
    o.retries = 1;
    assert_ok(mr_s3_open("bucket", &o, &s, NULL));
    char path[4200];
    snprintf(path, sizeof(path), "%s/s3-drop-%d.bin", mr_test_tmpdir(), (int)getpid());
    unlink(path);
    mr_error_init(&err);
    rc = mr_s3_get_file(s, "big.bin", path, &err);
    if (!(mr_test_torturing() && rc == MR_E_NOMEM)) {
        assert_status(rc, MR_E_IO);
        assert_non_null(strstr(err.msg, "s3://bucket/big.bin"));
    }
    assert_int_equal(access(path, F_OK), -1);
    mr_s3_close(s);
    shutdown(d.fd, SHUT_RDWR);
    close(d.fd);
    pthread_join(th, NULL);
    mr_buf_free(&b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sigv4_vectors),
        cmocka_unit_test(test_encoding_and_urls),
        cmocka_unit_test(test_credentials),
        cmocka_unit_test(test_client_failures),
    };
    return mr_test_run(tests, NULL, NULL);
}
