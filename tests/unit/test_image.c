/* Unit tests for image decoding and augmentation (src/data/image.c) and the
 * loader's decoding threads: PNG and JPEG made here with libpng and libjpeg
 * decode to their pixels (PNG exactly, JPEG within 2 at full scale), an
 * output the size of the box is an exact copy and a flip mirrors it, a
 * center crop larger than the image pads with zeros, the random choices
 * are a pure function of (seed, epoch, index) and stay inside the image,
 * broken or truncated files are MR_E_CORRUPT (never a crash), and a loader
 * decodes a binary column of images into N x H x W x 3 samples, with bad
 * ones failing the batch or counted as zeros. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "mr_test.h"

#include <stdio.h>
#include <jpeglib.h>
#include <png.h>
#include <stdlib.h>
#include <string.h>

#include "millrace/dataset.h"
#include "millrace/image.h"
#include "millrace/loader.h"

static mr_error err;
static char tmpdir[256];

static int setup_tmp(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof tmpdir, "%s/mr-img-XXXXXX", mr_test_tmpdir());
    mr_error_init(&err);
    return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown_tmp(void **state)
{
    (void)state;
    mr_fs_rmtree(tmpdir, NULL);
    return 0;
}

static uint8_t *pixels(int w, int h, unsigned seed)
{
    uint8_t *p = malloc((size_t)w * h * 3);
    assert_non_null(p);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *q = p + ((size_t)y * w + x) * 3;
            q[0] = (uint8_t)(x * 255 / (w - 1));
            q[1] = (uint8_t)(y * 255 / (h - 1));
            q[2] = (uint8_t)((x * 7 + y * 13 + seed) & 0xff);
        }
    return p;
}

static void *make_png(const uint8_t *px, int w, int h, size_t *len)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = (png_uint_32)w;
    img.height = (png_uint_32)h;
    img.format = PNG_FORMAT_RGB;
    png_alloc_size_t n = 0;
    assert_true(png_image_write_to_memory(&img, NULL, &n, 0, px, 0, NULL));
    void *buf = malloc(n);
    assert_non_null(buf);
    assert_true(png_image_write_to_memory(&img, buf, &n, 0, px, 0, NULL));
    *len = n;
    return buf;
}

static void *make_jpeg(const uint8_t *px, int w, int h, size_t *len)
{
    struct jpeg_compress_struct c;
    struct jpeg_error_mgr e;
    c.err = jpeg_std_error(&e);
    jpeg_create_compress(&c);
    unsigned char *buf = NULL;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &buf, &n);
    c.image_width = (JDIMENSION)w;
    c.image_height = (JDIMENSION)h;
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 95, TRUE);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = (JSAMPROW)(px + (size_t)c.next_scanline * w * 3);
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    jpeg_destroy_compress(&c);
    *len = n;
    return buf;
}

/* libjpeg's own full-scale RGB decode: the reference. */
static uint8_t *plain_jpeg(const void *data, size_t len)
{
    struct jpeg_decompress_struct d;
    struct jpeg_error_mgr e;
    d.err = jpeg_std_error(&e);
    jpeg_create_decompress(&d);
    jpeg_mem_src(&d, data, (unsigned long)len);
    jpeg_read_header(&d, TRUE);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    uint8_t *px = malloc((size_t)d.output_width * d.output_height * 3);
    assert_non_null(px);
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = px + (size_t)d.output_scanline * d.output_width * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    jpeg_destroy_decompress(&d);
    return px;
}

static void opts_resize(mr_image_opts *o, int h, int w)
{
    mr_image_opts_init(o);
    o->geometry = MR_IMG_RESIZE;
    o->out_h = h;
    o->out_w = w;
}

static void test_decode_exact(void **state)
{
    (void)state;
    int w = 37, h = 23;
    uint8_t *px = pixels(w, h, 1);
    size_t plen, jlen;
    void *png = make_png(px, w, h, &plen), *jpg = make_jpeg(px, w, h, &jlen);
    mr_image_opts o;
    opts_resize(&o, h, w);
    uint8_t *out = malloc(mr_image_out_bytes(&o));
    assert_non_null(out);
    assert_ok(mr_image_decode(&o, png, plen, 1, 2, 3, out, &err));
    assert_memory_equal(out, px, (size_t)w * h * 3);
    o.hflip = 1;
    assert_ok(mr_image_decode(&o, png, plen, 1, 2, 3, out, &err));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            assert_memory_equal(out + ((size_t)y * w + x) * 3, px + ((size_t)y * w + (w - 1 - x)) * 3, 3);
    o.hflip = 0;
    assert_ok(mr_image_decode(&o, jpg, jlen, 1, 2, 3, out, &err));
    uint8_t *ref = plain_jpeg(jpg, jlen); /* at full scale: libjpeg's pixels, untouched */
    assert_memory_equal(out, ref, (size_t)w * h * 3);
    free(ref);
    int iw = 0, ih = 0;
    assert_ok(mr_image_size(jpg, jlen, &iw, &ih, &err));
    assert_int_equal(iw, w);
    assert_int_equal(ih, h);
    /* a center crop larger than the image: zeros around it */
    mr_image_opts c;
    mr_image_opts_init(&c);
    c.geometry = MR_IMG_CENTER_CROP;
    c.out_h = h + 4;
    c.out_w = w + 2;
    uint8_t *big = malloc(mr_image_out_bytes(&c));
    assert_non_null(big);
    assert_ok(mr_image_decode(&c, png, plen, 0, 0, 0, big, &err));
    assert_int_equal(big[0], 0);
    assert_memory_equal(big + ((size_t)2 * (w + 2) + 1) * 3, px, 3);
    free(big);
    free(out);
    free(px);
    free(png);
    free(jpg);
}

static void test_params(void **state)
{
    (void)state;
    mr_image_opts o;
    mr_image_opts_init(&o);
    o.geometry = MR_IMG_RANDOM_RESIZED_CROP;
    o.out_h = o.out_w = 32;
    o.hflip = 0.5;
    int flips = 0, moved = 0;
    mr_image_box first;
    for (uint64_t i = 0; i < 200; i++) {
        mr_image_box a, b;
        mr_image_params(&o, 42, 1, i, 640, 480, &a);
        mr_image_params(&o, 42, 1, i, 640, 480, &b);
        assert_true(a.x == b.x && a.y == b.y && a.w == b.w && a.h == b.h && a.flip == b.flip); /* a pure function */
        assert_true(a.x >= 0 && a.y >= 0 && a.x + a.w <= 640 && a.y + a.h <= 480 && a.w > 0 && a.h > 0);
        double area = a.w * a.h / (640.0 * 480.0);
        assert_true(area >= 0.08 * 0.98 && area <= 1.0);
        flips += a.flip;
        if (i == 0) first = a;
        else moved += a.x != first.x || a.w != first.w;
    }
    assert_true(flips > 60 && flips < 140);
    assert_true(moved > 150);
    mr_image_box e1, e2;
    mr_image_params(&o, 42, 1, 7, 640, 480, &e1);
    mr_image_params(&o, 42, 2, 7, 640, 480, &e2);
    assert_true(e1.x != e2.x || e1.y != e2.y || e1.w != e2.w);
    o.scale[0] = 2;
    mr_error_clear(&err);
    assert_status(mr_image_opts_check(&o, &err), MR_E_INVALID_ARG);
    assert_non_null(strstr(err.msg, "scale"));
    mr_image_opts_init(&o);
    mr_error_clear(&err);
    assert_status(mr_image_opts_check(&o, &err), MR_E_INVALID_ARG); /* no geometry */
}

static void test_broken(void **state)
{
    (void)state;
    int w = 64, h = 48;
    uint8_t *px = pixels(w, h, 3);
    size_t plen, jlen;
    uint8_t *png = make_png(px, w, h, &plen), *jpg = make_jpeg(px, w, h, &jlen);
    mr_image_opts o;
    opts_resize(&o, 16, 16);
    uint8_t *out = malloc(mr_image_out_bytes(&o));
    assert_non_null(out);
    for (size_t cut = 0; cut < jlen; cut += jlen / 13 + 1) {
        mr_error_clear(&err);
        mr_status rc = mr_image_decode(&o, jpg, cut, 0, 0, 0, out, &err);
        if (rc != MR_OK) assert_status(rc, MR_E_CORRUPT); /* libjpeg pads a truncated scan; never a crash */
    }
    for (size_t cut = 0; cut < plen; cut += plen / 11 + 1) {
        mr_error_clear(&err);
        assert_status(mr_image_decode(&o, png, cut, 0, 0, 0, out, &err), MR_E_CORRUPT);
    }
    png[plen / 2] ^= 0x5a; /* a flipped byte: the CRC or zlib says so */
    mr_error_clear(&err);
    assert_status(mr_image_decode(&o, png, plen, 0, 0, 0, out, &err), MR_E_CORRUPT);
    assert_non_null(strstr(err.msg, "PNG"));
    mr_error_clear(&err);
    assert_status(mr_image_decode(&o, "GIF89a", 6, 0, 0, 0, out, &err), MR_E_CORRUPT);
    assert_non_null(strstr(err.msg, "neither a JPEG nor a PNG"));
    free(out);
    free(px);
    free(png);
    free(jpg);
}

/* A dataset of 10 PNGs (the 4th broken) in a binary column; the loader decodes it. */
static void test_loader_decodes(void **state)
{
    (void)state;
    mr_table *t = NULL;
    mr_column *id = NULL, *im = NULL;
    assert_ok(mr_table_new(&t, &err));
    assert_ok(mr_column_new("id", MR_T_INT64, 10, &id, &err));
    assert_ok(mr_column_new("image", MR_T_STRING, 10, &im, &err));
    im->kind.flags |= MR_KIND_BINARY;
    uint8_t *px[10];
    for (int i = 0; i < 10; i++) {
        px[i] = pixels(12, 8, (unsigned)i);
        size_t len;
        void *png = make_png(px[i], 12, 8, &len);
        assert_ok(mr_column_append_int64(id, i));
        assert_ok(mr_column_append_str(im, i == 3 ? "\x89PNG\r\n\x1a\nxx" : png, i == 3 ? 10 : len));
        free(png);
    }
    assert_ok(mr_table_add_column(t, id, &err));
    assert_ok(mr_table_add_column(t, im, &err));
    char *dir = mr_path_join(tmpdir, "ds");
    assert_alloc(dir);
    mr_dataset_write_opts wo;
    mr_dataset_write_opts_init(&wo);
    wo.row_group_rows = 3;
    assert_ok(mr_dataset_write_table(dir, t, &wo, NULL, &err));
    mr_table_free(t);
    mr_loader_opts o;
    mr_loader_opts_init(&o);
    o.batch_size = 4;
    o.threads = 2;
    o.decode_column = "image";
    o.image.geometry = MR_IMG_RESIZE;
    o.image.out_h = 8;
    o.image.out_w = 12;
    mr_loader *ld = NULL;
    mr_table *b = NULL;
    assert_ok(mr_loader_open(dir, &o, &ld, &err));
    mr_error_clear(&err);
    assert_status(mr_loader_next(ld, &b, &err), MR_E_CORRUPT); /* rows 0-3: row 3 is broken */
    assert_null(b);
    assert_non_null(strstr(err.msg, "part-00000.parquet"));
    assert_non_null(strstr(err.msg, "sample 3 of epoch 0, column 'image': not a readable PNG"));
    mr_loader_close(ld);
    o.decode_skip_errors = 1;
    assert_ok(mr_loader_open(dir, &o, &ld, &err));
    size_t row = 0;
    for (;;) {
        assert_ok(mr_loader_next(ld, &b, &err));
        if (!b) break;
        const mr_column *c = mr_table_column(b, "image");
        assert_non_null(c);
        assert_int_equal(c->bytes_len, b->n_rows * 8 * 12 * 3);
        for (size_t i = 0; i < b->n_rows; i++, row++) {
            const uint8_t *s = (const uint8_t *)c->bytes + i * 8 * 12 * 3;
            if (row == 3) {
                for (size_t k = 0; k < 8 * 12 * 3; k++) assert_int_equal(s[k], 0);
            } else {
                assert_memory_equal(s, px[row], 8 * 12 * 3);
            }
        }
        mr_table_free(b);
    }
    assert_int_equal(row, 10);
    mr_loader_stats st;
    mr_loader_stats_get(ld, &st);
    assert_int_equal(st.images, 10);
    assert_int_equal(st.decode_errors, 1);
    mr_loader_close(ld);
    o.decode_column = "id";
    mr_error_clear(&err);
    assert_status(mr_loader_open(dir, &o, &ld, &err), MR_E_SCHEMA);
    for (int i = 0; i < 10; i++) free(px[i]);
    mr_free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_decode_exact, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_params, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_broken, setup_tmp, teardown_tmp),
        cmocka_unit_test_setup_teardown(test_loader_decodes, setup_tmp, teardown_tmp),
    };
    return mr_test_run(tests, NULL, NULL);
}
