/* libFuzzer target for the online feature store reader (src/data/online.c):
 * each input is written to a private file (in /dev/shm when writable) and
 * opened as a store; one that opens has its schema read and a few keys
 * looked up (as of the end of time, so every value that is present is
 * read). A file must open or fail with MR_E_CORRUPT and a message, and a
 * lookup must answer or fail with MR_E_CORRUPT / MR_E_PARSE, never crash
 * or read outside the file (ASan). Also built with any compiler for the
 * corpus replay (replay.c), which ctest always runs. */
#include "millrace/online.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char path[128];

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_online: property broken: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(path, sizeof(path), "%s/mr_fuzz_online_%ld.mrfs", dir, (long)getpid());
    }
    FILE *f = fopen(path, "wb");
    if (!f) return 0;
    if (size) fwrite(data, 1, size, f);
    fclose(f);
    mr_online *s = NULL;
    mr_error err;
    mr_error_init(&err);
    mr_status st = mr_online_open(path, &s, &err);
    if (st != MR_OK) {
        check(st == MR_E_CORRUPT || st == MR_E_NOMEM, "open fails only as MR_E_CORRUPT");
        check(err.msg[0] != '\0', "a failed open says why");
        unlink(path);
        return 0;
    }
    for (size_t k = 0; k < mr_online_n_keys(s); k++) check(mr_online_key_name(s, k) != NULL, "key names");
    for (size_t i = 0; i < mr_online_n_features(s); i++)
        check(mr_online_feature_view(s, i) < mr_online_n_views(s), "a feature's view is a view");
    static const char *const texts[] = {"0", "1", "42", "u07", "true", "2024-01-01", "2024-01-01 10:00:00", ""};
    const char *keys[64];
    for (size_t t = 0; t < sizeof(texts) / sizeof(texts[0]); t++) {
        for (size_t k = 0; k < mr_online_n_keys(s) && k < 64; k++) keys[k] = texts[(t + k) % 8];
        mr_table *row = NULL;
        mr_error_init(&err);
        st = mr_online_get(s, keys, INT64_MAX, &row, NULL, &err);
        if (!(st == MR_OK || st == MR_E_CORRUPT || st == MR_E_PARSE || st == MR_E_NOMEM))
            fprintf(stderr, "fuzz_online: lookup: %s: %s\n", mr_status_name(st), err.msg);
        check(st == MR_OK || st == MR_E_CORRUPT || st == MR_E_PARSE || st == MR_E_NOMEM, "a lookup's status");
        if (st == MR_OK) check(row->n_rows == 1 && row->n_cols == mr_online_n_features(s), "one row of every feature");
        mr_table_free(row);
    }
    mr_online_close(s);
    unlink(path);
    return 0;
}
