/* Corpus replay: feeds every file in the given directories to
 * LLVMFuzzerTestOneInput, so ctest exercises the fuzz targets' corpus with
 * any compiler (and under ASan/UBSan in the sanitizer build). */
#include "millrace/core.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int main(int argc, char **argv)
{
    int n = 0;
    for (int a = 1; a < argc; a++) {
        DIR *d = opendir(argv[a]);
        if (!d) {
            fprintf(stderr, "replay: cannot open %s\n", argv[a]);
            return 1;
        }
        struct dirent *e;
        while ((e = readdir(d)) != NULL) {
            if (e->d_name[0] == '.') continue;
            char *p = mr_path_join(argv[a], e->d_name);
            char *data = NULL;
            size_t len = 0;
            mr_error err;
            mr_error_init(&err);
            if (!p || mr_fs_read_file(p, (size_t)64 << 20, &data, &len, &err) != MR_OK) {
                fprintf(stderr, "replay: cannot read %s\n", p ? p : e->d_name);
                mr_free(p);
                closedir(d);
                return 1;
            }
            LLVMFuzzerTestOneInput((const uint8_t *)data, len);
            mr_free(data);
            mr_free(p);
            n++;
        }
        closedir(d);
    }
    printf("replayed %d inputs\n", n);
    mr_pool_shutdown();
    return n > 0 ? 0 : 1;
}
