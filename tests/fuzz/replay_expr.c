/* Replays files (or every file in directories) through the expression fuzz
 * entry point, so the corpus and past crashes run under ctest with any
 * compiler: replay_expr tests/fuzz/corpus/expr [more files or dirs]. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "millrace/core.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
    char *data = NULL;
    size_t len = 0;
    mr_error err;
    mr_error_init(&err);
    if (mr_fs_read_file(path, (size_t)1 << 24, &data, &len, &err) != MR_OK) {
        fprintf(stderr, "replay_expr: %s: %s\n", path, err.msg);
        return -1;
    }
    LLVMFuzzerTestOneInput((const uint8_t *)data, len);
    mr_free(data);
    return 0;
}

int main(int argc, char **argv)
{
    int n = 0, failed = 0;
    for (int a = 1; a < argc; a++) {
        struct stat st;
        if (stat(argv[a], &st) != 0) {
            fprintf(stderr, "replay_expr: %s: not found\n", argv[a]);
            failed = 1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed |= run_file(argv[a]) != 0;
            n++;
            continue;
        }
        DIR *d = opendir(argv[a]);
        if (!d) {
            failed = 1;
            continue;
        }
        for (struct dirent *de = readdir(d); de; de = readdir(d)) {
            if (de->d_name[0] == '.') continue;
            char *p = mr_path_join(argv[a], de->d_name);
            if (!p) {
                failed = 1;
                break;
            }
            failed |= run_file(p) != 0;
            n++;
            mr_free(p);
        }
        closedir(d);
    }
    printf("replay_expr: %d inputs\n", n);
    return failed || n == 0;
}
