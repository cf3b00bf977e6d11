/* Image decode + augmentation (image.h): the random choices of a sample,
 * the decoders (libjpeg-turbo with DCT scaling and cropping, libpng's
 * simplified API), and one bilinear resampler that every geometry goes
 * through: it maps output pixel centres into the source box. */
#include "millrace/image.h"

#include <jpeglib.h>
#include <math.h>
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_PIXELS ((uint64_t)1 << 26)

void mr_image_opts_init(mr_image_opts *o)
{
    memset(o, 0, sizeof *o);
    o->scale[0] = 0.08;
    o->scale[1] = 1.0;
    o->ratio[0] = 3.0 / 4.0;
    o->ratio[1] = 4.0 / 3.0;
    for (int c = 0; c < 3; c++) o->std[c] = 1.0f;
    o->dct_scale = 1;
}

mr_status mr_image_opts_check(const mr_image_opts *o, mr_error *err)
{
    if (o->geometry < MR_IMG_RESIZE || o->geometry > MR_IMG_RANDOM_RESIZED_CROP)
        return MR_ERR(err, MR_E_INVALID_ARG,
                      "decode needs one output size: resize, center_crop or random_resized_crop");
    if (o->out_h <= 0 || o->out_w <= 0 || o->out_h > 16384 || o->out_w > 16384)
        return MR_ERR(err, MR_E_INVALID_ARG, "decode: the output size must be 1..16384 pixels a side, got %dx%d",
                      o->out_h, o->out_w);
    if (o->resize_shorter < 0 || o->resize_shorter > 65536)
        return MR_ERR(err, MR_E_INVALID_ARG, "decode: resize_shorter must be 0..65536, got %d", o->resize_shorter);
    if (!(o->scale[0] > 0 && o->scale[0] <= o->scale[1] && o->scale[1] <= 1))
        return MR_ERR(err, MR_E_INVALID_ARG, "random_resized_crop: scale must be 0 < min <= max <= 1, got [%g, %g]",
                      o->scale[0], o->scale[1]);
    if (!(o->ratio[0] > 0 && o->ratio[0] <= o->ratio[1]))
        return MR_ERR(err, MR_E_INVALID_ARG, "random_resized_crop: ratio must be 0 < min <= max, got [%g, %g]",
                      o->ratio[0], o->ratio[1]);
    if (!(o->hflip >= 0 && o->hflip <= 1))
        return MR_ERR(err, MR_E_INVALID_ARG, "hflip is a probability in [0, 1], got %g", o->hflip);
    for (int c = 0; c < 3; c++)
        if (!(o->std[c] != 0) || !isfinite(o->std[c]) || !isfinite(o->mean[c]))
            return MR_ERR(err, MR_E_INVALID_ARG, "normalize: std must be non-zero and mean and std finite");
    return MR_OK;
}

size_t mr_image_out_bytes(const mr_image_opts *o)
{
    return (size_t)o->out_h * (size_t)o->out_w * 3 * (o->to_float ? sizeof(float) : 1);
}

/* ---- the random choices ---------------------------------------------------------------- */

static void sample_rng(mr_rng *r, uint64_t seed, uint64_t epoch, uint64_t index)
{
    uint64_t x = seed;
    uint64_t s = mr_splitmix64(&x);
    x = s ^ (epoch * 0x9e3779b97f4a7c15ULL + 0x632be59bd9b4e019ULL);
    s = mr_splitmix64(&x);
    x = s ^ (index * 0xbf58476d1ce4e5b9ULL + 0x94d049bb133111ebULL);
    mr_rng_seed(r, mr_splitmix64(&x));
}

static double uniform(mr_rng *r, double a, double b) { return a + (b - a) * mr_rng_uniform(r); }

void mr_image_params(const mr_image_opts *o, uint64_t seed, uint64_t epoch, uint64_t index, int width, int height,
                     mr_image_box *out)
{
    mr_rng r;
    sample_rng(&r, seed, epoch, index);
    double W = width, H = height;
    *out = (mr_image_box){0, 0, W, H, 0};
    if (o->geometry == MR_IMG_CENTER_CROP) {
        double rw = W, rh = H;
        if (o->resize_shorter) { /* torchvision Resize(int): the shorter side to S, the longer in proportion */
            if (width <= height) {
                rw = o->resize_shorter;
                rh = floor((double)o->resize_shorter * H / W);
            } else {
                rh = o->resize_shorter;
                rw = floor((double)o->resize_shorter * W / H);
            }
        }
        double sx = rw / W, sy = rh / H;
        double top = round((rh - o->out_h) / 2.0), left = round((rw - o->out_w) / 2.0);
        *out = (mr_image_box){left / sx, top / sy, o->out_w / sx, o->out_h / sy, 0};
    } else if (o->geometry == MR_IMG_RANDOM_RESIZED_CROP) { /* torchvision's get_params, our stream */
        double area = W * H, lr0 = log(o->ratio[0]), lr1 = log(o->ratio[1]);
        int found = 0;
        for (int t = 0; t < 10 && !found; t++) {
            double target = area * uniform(&r, o->scale[0], o->scale[1]);
            double aspect = exp(uniform(&r, lr0, lr1));
            int w = (int)lround(sqrt(target * aspect)), h = (int)lround(sqrt(target / aspect));
            if (w > 0 && w <= width && h > 0 && h <= height) {
                int i = (int)mr_rng_below(&r, (uint64_t)(height - h + 1));
                int j = (int)mr_rng_below(&r, (uint64_t)(width - w + 1));
                *out = (mr_image_box){j, i, w, h, 0};
                found = 1;
            }
        }
        if (!found) {
            double in_ratio = W / H, w = W, h = H;
            if (in_ratio < o->ratio[0]) h = (double)lround(w / o->ratio[0]);
            else if (in_ratio > o->ratio[1]) w = (double)lround(h * o->ratio[1]);
            *out = (mr_image_box){floor((W - w) / 2), floor((H - h) / 2), w, h, 0};
        }
    }
    if (o->hflip > 0) out->flip = mr_rng_uniform(&r) < o->hflip;
}

/* ---- resampling ------------------------------------------------------------------------ */

/* src: rows [ry, ry + rh) and columns [rx, rx + rw) of a dw x dh RGB image; the box is in that
 * image's coordinates. Writes the output sample. */
static void resample(const mr_image_opts *o, const uint8_t *src, int rx, int ry, int rw, int rh, int dw, int dh,
                     double bx, double by, double bw, double bh, int flip, void *out)
{
    const int ow = o->out_w, oh = o->out_h;
    uint8_t *o8 = out;
    float *of = out;
    const size_t plane = (size_t)ow * (size_t)oh;
    const int exact = bw == ow && bh == oh && bx == floor(bx) && by == floor(by);
    for (int y = 0; y < oh; y++) {
        double fy = exact ? by + y : by + (y + 0.5) * bh / oh - 0.5;
        int outside_y = fy < -0.5 || fy > dh - 0.5;
        if (fy < 0) fy = 0;
        if (fy > dh - 1) fy = dh - 1;
        int y0 = (int)fy, y1 = y0 + 1 < dh ? y0 + 1 : y0;
        float wy = (float)(fy - y0);
        for (int x = 0; x < ow; x++) {
            double fx = exact ? bx + x : bx + (x + 0.5) * bw / ow - 0.5;
            int outside = outside_y || fx < -0.5 || fx > dw - 0.5;
            if (fx < 0) fx = 0;
            if (fx > dw - 1) fx = dw - 1;
            int x0 = (int)fx, x1 = x0 + 1 < dw ? x0 + 1 : x0;
            float wx = (float)(fx - x0);
            int xo = flip ? ow - 1 - x : x;
            for (int c = 0; c < 3; c++) {
                uint8_t v = 0;
                if (!outside) {
                    const uint8_t *r0 = src + ((size_t)(y0 - ry) * (size_t)rw) * 3, *r1 = src + ((size_t)(y1 - ry) * (size_t)rw) * 3;
                    float a = r0[(x0 - rx) * 3 + c], b = r0[(x1 - rx) * 3 + c];
                    float d = r1[(x0 - rx) * 3 + c], e = r1[(x1 - rx) * 3 + c];
                    float top = a + (b - a) * wx, bot = d + (e - d) * wx;
                    float f = top + (bot - top) * wy + 0.5f;
                    v = f <= 0 ? 0 : f >= 255 ? 255 : (uint8_t)f;
                }
                if (o->to_float) of[(size_t)c * plane + (size_t)y * ow + xo] = (v / 255.0f - o->mean[c]) / o->std[c];
                else o8[((size_t)y * ow + xo) * 3 + c] = v;
            }
        }
    }
    (void)rh;
}

/* The source rows/columns the resampler reads for box (with its neighbours), clamped. */
static void needed(double b, double len, int out, int dim, int *lo, int *hi)
{
    double first = b + 0.5 * len / out - 0.5, last = b + (out - 0.5) * len / out - 0.5;
    int l = (int)floor(first) - 1, h = (int)ceil(last) + 2;
    *lo = l < 0 ? 0 : l > dim - 1 ? dim - 1 : l;
    *hi = h > dim ? dim : h < *lo + 1 ? *lo + 1 : h;
}

/* ---- JPEG --------------------------------------------------------------------------------- */

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX];
} jerr;

static void jerr_exit(j_common_ptr c)
{
    jerr *e = (jerr *)c->err;
    (*c->err->format_message)(c, e->msg);
    longjmp(e->jb, 1);
}

static void jerr_quiet(j_common_ptr c, int level)
{
    (void)c, (void)level; /* warnings (corrupt data recovered) are not printed */
}

static int is_jpeg(const uint8_t *p, size_t len) { return len >= 3 && p[0] == 0xff && p[1] == 0xd8 && p[2] == 0xff; }
static int is_png(const uint8_t *p, size_t len) { return len >= 8 && !memcmp(p, "\x89PNG\r\n\x1a\n", 8); }

static mr_status decode_jpeg(const mr_image_opts *o, const uint8_t *data, size_t len, uint64_t seed, uint64_t epoch,
                             uint64_t index, void *out, int size_only, int *wo, int *ho, mr_error *err)
{
    struct jpeg_decompress_struct ci;
    jerr je;
    uint8_t *volatile region = NULL;
    memset(&ci, 0, sizeof ci);
    ci.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = jerr_exit;
    je.pub.emit_message = jerr_quiet;
    je.msg[0] = '\0';
    if (setjmp(je.jb)) {
        jpeg_destroy_decompress(&ci);
        mr_free(region);
        return MR_ERR(err, MR_E_CORRUPT, "not a readable JPEG: %s", je.msg);
    }
    jpeg_create_decompress(&ci);
    jpeg_mem_src(&ci, data, (unsigned long)len);
    jpeg_read_header(&ci, TRUE);
    int W = (int)ci.image_width, H = (int)ci.image_height;
    if (size_only || (uint64_t)W * (uint64_t)H > MAX_PIXELS) {
        jpeg_destroy_decompress(&ci);
        *wo = W;
        *ho = H;
        if (size_only) return MR_OK;
        return MR_ERR(err, MR_E_LIMIT, "a %dx%d image is over the limit of %llu pixels", W, H,
                      (unsigned long long)MAX_PIXELS);
    }
    mr_image_box b;
    mr_image_params(o, seed, epoch, index, W, H, &b);
    int k = 8; /* the smallest k/8 that still covers the output */
    if (o->dct_scale)
        for (int t = 1; t < 8; t++)
            if (b.w * t / 8 >= o->out_w && b.h * t / 8 >= o->out_h) {
                k = t;
                break;
            }
    ci.out_color_space = JCS_RGB;
    ci.scale_num = (unsigned)k;
    ci.scale_denom = 8;
    jpeg_start_decompress(&ci);
    int dw = (int)ci.output_width, dh = (int)ci.output_height;
    double fx = (double)dw / W, fy = (double)dh / H;
    double bx = b.x * fx, by = b.y * fy, bw = b.w * fx, bh = b.h * fy;
    int x0, x1, y0, y1;
    needed(bx, bw, o->out_w, dw, &x0, &x1);
    needed(by, bh, o->out_h, dh, &y0, &y1);
    JDIMENSION xoff = (JDIMENSION)x0, cw = (JDIMENSION)(x1 - x0);
    if (cw < (JDIMENSION)dw) jpeg_crop_scanline(&ci, &xoff, &cw); /* widened to iMCU boundaries */
    int rw = (int)cw, rh = y1 - y0;
    region = mr_malloc((size_t)rw * (size_t)rh * 3);
    if (!region) {
        jpeg_destroy_decompress(&ci);
        return MR_ERR(err, MR_E_NOMEM, "out of memory decoding a %dx%d JPEG", W, H);
    }
    if (y0 > 0) jpeg_skip_scanlines(&ci, (JDIMENSION)y0);
    while ((int)ci.output_scanline < y1) {
        JSAMPROW row = region + (size_t)((int)ci.output_scanline - y0) * (size_t)rw * 3;
        jpeg_read_scanlines(&ci, &row, 1);
    }
    jpeg_abort_decompress(&ci);
    jpeg_destroy_decompress(&ci);
    resample(o, region, (int)xoff, y0, rw, rh, dw, dh, bx, by, bw, bh, b.flip, out);
    mr_free(region);
    return MR_OK;
}

/* ---- PNG ---------------------------------------------------------------------------------- */

static mr_status decode_png(const mr_image_opts *o, const uint8_t *data, size_t len, uint64_t seed, uint64_t epoch,
                            uint64_t index, void *out, int size_only, int *wo, int *ho, mr_error *err)
{
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_memory(&img, data, len)) {
        mr_status rc = MR_ERR(err, MR_E_CORRUPT, "not a readable PNG: %s", img.message);
        png_image_free(&img);
        return rc;
    }
    int W = (int)img.width, H = (int)img.height;
    if (size_only || (uint64_t)W * (uint64_t)H > MAX_PIXELS) {
        png_image_free(&img);
        *wo = W;
        *ho = H;
        if (size_only) return MR_OK;
        return MR_ERR(err, MR_E_LIMIT, "a %dx%d image is over the limit of %llu pixels", W, H,
                      (unsigned long long)MAX_PIXELS);
    }
    img.format = PNG_FORMAT_RGB;
    uint8_t *px = mr_malloc(PNG_IMAGE_SIZE(img));
    if (!px) {
        png_image_free(&img);
        return MR_ERR(err, MR_E_NOMEM, "out of memory decoding a %dx%d PNG", W, H);
    }
    if (!png_image_finish_read(&img, NULL, px, 0, NULL)) {
        mr_status rc = MR_ERR(err, MR_E_CORRUPT, "not a readable PNG: %s", img.message);
        png_image_free(&img);
        mr_free(px);
        return rc;
    }
    mr_image_box b;
    mr_image_params(o, seed, epoch, index, W, H, &b);
    resample(o, px, 0, 0, W, H, W, H, b.x, b.y, b.w, b.h, b.flip, out);
    mr_free(px);
    return MR_OK;
}

mr_status mr_image_decode(const mr_image_opts *o, const void *data, size_t len, uint64_t seed, uint64_t epoch,
                          uint64_t index, void *out, mr_error *err)
{
    const uint8_t *p = data;
    int w, h;
    mr_img_format f = o->format;
    if (f == MR_IMG_AUTO) f = is_jpeg(p, len) ? MR_IMG_JPEG : is_png(p, len) ? MR_IMG_PNG : MR_IMG_AUTO;
    if (f == MR_IMG_JPEG) return decode_jpeg(o, p, len, seed, epoch, index, out, 0, &w, &h, err);
    if (f == MR_IMG_PNG) return decode_png(o, p, len, seed, epoch, index, out, 0, &w, &h, err);
    return MR_ERR(err, MR_E_CORRUPT, "neither a JPEG nor a PNG (%zu bytes, starting %02x %02x)", len,
                  len > 0 ? p[0] : 0, len > 1 ? p[1] : 0);
}

mr_status mr_image_size(const void *data, size_t len, int *width, int *height, mr_error *err)
{
    const uint8_t *p = data;
    mr_image_opts o;
    mr_image_opts_init(&o);
    if (is_jpeg(p, len)) return decode_jpeg(&o, p, len, 0, 0, 0, NULL, 1, width, height, err);
    if (is_png(p, len)) return decode_png(&o, p, len, 0, 0, 0, NULL, 1, width, height, err);
    return MR_ERR(err, MR_E_CORRUPT, "neither a JPEG nor a PNG");
}
