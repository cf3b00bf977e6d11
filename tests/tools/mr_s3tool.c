/* Test helper (not installed): the S3 client (include/millrace/s3.h) from
 * the shell, for tests/e2e/test_s3_client.sh and for humans. The bucket and
 * endpoint come from MILLRACE_S3_BUCKET and MILLRACE_S3_ENDPOINT (as
 * scripts/start-s3.sh exports them), the credentials as every AWS tool
 * finds them; MR_S3_MULTIPART sets the multipart threshold in bytes and
 * MR_S3_RETRIES the retries. After each command the client's counters go
 * to stderr: "requests=N retries=N up=N down=N".
 *
 *   mr_s3tool put KEY FILE          mr_s3tool get KEY [OFF LEN]   (to stdout)
 *   mr_s3tool putmem KEY TEXT       mr_s3tool getfile KEY PATH
 *   mr_s3tool getv KEY ETAG         (the object only as that version)
 *   mr_s3tool head KEY              (prints SIZE ETAG)
 *   mr_s3tool ls PREFIX             (prints KEY SIZE per line)
 *   mr_s3tool rm KEY */
#include "millrace/s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int print_key(void *arg, const char *key, uint64_t size)
{
    (void)arg;
    printf("%s %llu\n", key, (unsigned long long)size);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: mr_s3tool put|putmem|get|getv|getfile|head|ls|rm KEY [...]\n");
        return 2;
    }
    const char *bucket = getenv("MILLRACE_S3_BUCKET");
    mr_s3_opts o;
    mr_s3_opts_init(&o);
    o.endpoint = getenv("MILLRACE_S3_ENDPOINT");
    if (getenv("MR_S3_MULTIPART")) o.multipart_bytes = strtoull(getenv("MR_S3_MULTIPART"), NULL, 10);
    if (getenv("MR_S3_RETRIES")) o.retries = atoi(getenv("MR_S3_RETRIES"));
    mr_error err;
    mr_error_init(&err);
    mr_s3 *s = NULL;
    const char *cmd = argv[1], *key = argv[2];
    mr_status rc = mr_s3_open(bucket ? bucket : "", &o, &s, &err);
    if (rc == MR_OK) {
        if (!strcmp(cmd, "put") && argc == 4) rc = mr_s3_put_file(s, key, argv[3], &err);
        else if (!strcmp(cmd, "putmem") && argc == 4) rc = mr_s3_put(s, key, argv[3], strlen(argv[3]), &err);
        else if (!strcmp(cmd, "get") && (argc == 3 || argc == 5)) {
            mr_buf b;
            mr_buf_init(&b);
            rc = mr_s3_get(s, key, argc == 5 ? strtoull(argv[3], NULL, 10) : 0,
                           argc == 5 ? strtoull(argv[4], NULL, 10) : 0, &b, &err);
            if (rc == MR_OK && b.len) fwrite(b.data, 1, b.len, stdout);
            mr_buf_free(&b);
        } else if (!strcmp(cmd, "getv") && argc == 4) { /* KEY ETAG: that version only */
            mr_buf b;
            mr_buf_init(&b);
            rc = mr_s3_get_version(s, key, argv[3], 0, 0, &b, &err);
            if (rc == MR_OK && b.len) fwrite(b.data, 1, b.len, stdout);
            mr_buf_free(&b);
        } else if (!strcmp(cmd, "getfile") && argc == 4) rc = mr_s3_get_file(s, key, argv[3], &err);
        else if (!strcmp(cmd, "head") && argc == 3) {
            uint64_t size = 0;
            char etag[128];
            rc = mr_s3_head(s, key, &size, etag, &err);
            if (rc == MR_OK) printf("%llu %s\n", (unsigned long long)size, etag);
        } else if (!strcmp(cmd, "ls") && argc == 3) rc = mr_s3_list(s, key, print_key, NULL, &err);
        else if (!strcmp(cmd, "rm") && argc == 3) rc = mr_s3_delete(s, key, &err);
        else {
            fprintf(stderr, "mr_s3tool: unknown command or arguments\n");
            mr_s3_close(s);
            return 2;
        }
        mr_s3_stats st;
        mr_s3_get_stats(s, &st);
        fprintf(stderr, "requests=%llu retries=%llu up=%llu down=%llu\n", (unsigned long long)st.requests,
                (unsigned long long)st.retries, (unsigned long long)st.bytes_up, (unsigned long long)st.bytes_down);
    }
    mr_s3_close(s);
    if (rc != MR_OK) {
        mr_log_error(&err);
        return rc == MR_E_NOT_FOUND ? 3 : 1;
    }
    return 0;
}
