/* Replays a fuzz corpus through LLVMFuzzerTestOneInput without libFuzzer,
 * so CTest (gcc, optionally ASan/UBSan) runs every corpus file:
 *   replay_parquet DIR_OR_FILE...
 * Exits non-zero only if a path cannot be read; crashes abort the run. */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "millrace/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_path(const char *path, int *n)
{
    struct stat st;
    if (stat(path, &st)) {
        fprintf(stderr, "replay: cannot stat %s\n", path);
        return 1;
    }
    if (S_ISDIR(st.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return 1;
        int rc = 0;
        struct dirent *e;
        while ((e = readdir(d)))
            if (e->d_name[0] != '.') {
                char *p = mr_path_join(path, e->d_name);
                rc |= run_path(p, n);
                mr_free(p);
            }
        closedir(d);
        return rc;
    }
    char *data = NULL;
    size_t len = 0;
    if (mr_fs_read_file(path, (size_t)64 << 20, &data, &len, NULL) != MR_OK) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        return 1;
    }
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
    return rc || n == 0;
}
