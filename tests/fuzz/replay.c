/* Corpus replay: feeds every file named on the command line, and every file
 * under every directory named (recursively, dot files skipped, in name
 * order), to LLVMFuzzerTestOneInput, so ctest runs each fuzz target's
 * corpus with any compiler (and under ASan/UBSan in the sanitizer build)
 * without libFuzzer:
 *   fuzz_replay_X DIR_OR_FILE...
 * A broken property aborts inside the target; a path that cannot be read,
 * or no input at all, is a failure (exit 1). */
#include "millrace/core.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define REPLAY_MAX_BYTES ((size_t)64 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int run_path(const char *path, int *n)
{
    struct stat st;
    if (stat(path, &st) != 0) {
        fprintf(stderr, "replay: cannot stat %s\n", path);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) {
            fprintf(stderr, "replay: cannot open %s\n", path);
            return 1;
        }
        char **names = NULL;
        size_t n_names = 0, cap = 0;
        int rc = 0;
        for (struct dirent *e = readdir(d); e && !rc; e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            if (n_names == cap) {
                cap = cap ? cap * 2 : 64;
                char **nn = mr_realloc(names, cap * sizeof(*nn));
                if (!nn) rc = 1;
                else names = nn;
            }
            if (!rc && !(names[n_names++] = mr_path_join(path, e->d_name))) rc = 1;
        }
        closedir(d);
        if (!rc) qsort(names, n_names, sizeof(*names), by_name); /* a stable order: failures reproduce */
        for (size_t i = 0; i < n_names; i++) {
            if (!rc && names[i]) rc |= run_path(names[i], n);
            mr_free(names[i]);
        }
        mr_free(names);
        if (rc) fprintf(stderr, "replay: failed under %s\n", path);
        return rc;
    }
    char *data = NULL;
    size_t len = 0;
    mr_error err;
    mr_error_init(&err);
    if (mr_fs_read_file(path, REPLAY_MAX_BYTES, &data, &len, &err) != MR_OK) {
        fprintf(stderr, "replay: cannot read %s: %s\n", path, err.msg);
        return 1;
    }
    if (getenv("MR_REPLAY_VERBOSE")) fprintf(stderr, "replay: %s\n", path);
    LLVMFuzzerTestOneInput((const uint8_t *)data, len);
    mr_free(data);
    (*n)++;
    return 0;
}

int main(int argc, char **argv)
{
    int rc = 0, n = 0;
    for (int i = 1; i < argc; i++) rc |= run_path(argv[i], &n);
    printf("replayed %d inputs\n", n);
    mr_pool_shutdown();
    return rc || n == 0;
}
