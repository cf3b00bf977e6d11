/* libFuzzer target for image decoding and augmentation (src/data/image.c):
 * each input is a mode byte and the file (JPEG, PNG, or anything). The mode
 * picks the geometry (resize, center crop, random resized crop), an output
 * of 1..32 pixels a side, the flip, float output and the DCT-scaled decode.
 * A file must decode or fail with MR_E_CORRUPT / MR_E_LIMIT and a message,
 * never crash; a file that decodes must decode again to the same bytes (the
 * random choices are a pure function of seed, epoch and index) and its
 * header size must be readable. Images over 4096 x 4096 are left out (they
 * would only be slow). Also built with any compiler for the corpus replay
 * (replay.c), which ctest always runs. */
#include "millrace/image.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int ok, const char *what)
{
    if (ok) return;
    fprintf(stderr, "fuzz_image: property broken: %s\n", what);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2) return 0;
    uint8_t mode = data[0];
    const uint8_t *file = data + 1;
    size_t len = size - 1;
    mr_error err;
    mr_error_init(&err);
    int w = 0, h = 0;
    mr_status sz = mr_image_size(file, len, &w, &h, &err);
    if (sz == MR_OK && ((size_t)w > 4096 || (size_t)h > 4096)) return 0;
    mr_image_opts o;
    mr_image_opts_init(&o);
    o.geometry = (mr_img_geometry)(1 + mode % 3);
    o.out_h = 1 + (mode >> 2) % 32;
    o.out_w = 1 + ((mode >> 2) * 7) % 32;
    o.hflip = (mode & 0x40) ? 0.5 : 0;
    o.to_float = (mode & 0x80) != 0;
    o.dct_scale = (mode & 0x20) == 0;
    if (o.geometry == MR_IMG_CENTER_CROP && (mode & 0x10)) o.resize_shorter = 1 + mode % 40;
    check(mr_image_opts_check(&o, NULL) == MR_OK, "the harness's options are valid");
    size_t n = mr_image_out_bytes(&o);
    uint8_t *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    mr_error_clear(&err);
    mr_status rc = mr_image_decode(&o, file, len, 7, (uint64_t)mode, len, a, &err);
    if (rc == MR_OK) {
        check(sz == MR_OK && w > 0 && h > 0, "a decoded image has a readable size");
        mr_error e2;
        mr_error_init(&e2);
        check(mr_image_decode(&o, file, len, 7, (uint64_t)mode, len, b, &e2) == MR_OK, "decodes twice");
        check(!memcmp(a, b, n), "the same file, seed, epoch and index give the same sample");
    } else {
        check(rc == MR_E_CORRUPT || rc == MR_E_LIMIT || rc == MR_E_NOMEM, "a documented status");
        check(err.msg[0] != '\0', "a failure has a message");
    }
    free(a);
    free(b);
    return 0;
}
