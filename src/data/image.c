/* Image decode + augmentation (image.h): the random choices of a sample,
 * the decoders (libjpeg-turbo with DCT scaling and cropping, libpng's
 * simplified API), and one bilinear resampler that every geometry goes
 * through: it maps output pixel centres into the source box. */
#include "millrace/image.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
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

/* dst[i] = clamp(t0[i] + (t1[i] - t0[i]) * wy + 0.5, 0, 255), truncated: the vertical blend of
 * two interpolated rows. SSE2 (every x86-64) 16 values at a time, the same values as the scalar
 * loop: clamping before truncation is what the scalar comparisons do. */
static void blend_row(const float *t0, const float *t1, float wy, int n, uint8_t *dst)
{
    int i = 0;
#if defined(__SSE2__)
    const __m128 w = _mm_set1_ps(wy), half = _mm_set1_ps(0.5f), lo = _mm_setzero_ps(), hi = _mm_set1_ps(255.0f);
    for (; i + 16 <= n; i += 16) {
        __m128i q[4];
        for (int k = 0; k < 4; k++) {
            __m128 a = _mm_loadu_ps(t0 + i + 4 * k), b = _mm_loadu_ps(t1 + i + 4 * k);
            __m128 f = _mm_add_ps(_mm_add_ps(a, _mm_mul_ps(_mm_sub_ps(b, a), w)), half);
            q[k] = _mm_cvttps_epi32(_mm_min_ps(_mm_max_ps(f, lo), hi));
        }
        __m128i p = _mm_packus_epi16(_mm_packs_epi32(q[0], q[1]), _mm_packs_epi32(q[2], q[3]));
        _mm_storeu_si128((__m128i *)(dst + i), p);
    }
#endif
    for (; i < n; i++) {
        float f = t0[i] + (t1[i] - t0[i]) * wy + 0.5f;
        dst[i] = f <= 0 ? 0 : f >= 255 ? 255 : (uint8_t)f;
    }
}

/* One output column's source taps. */
typedef struct xtap {
    int x0, x1;  /* source columns, relative to the region */
    float wx;
    int outside; /* the pixel centre falls outside the image: zero */
} xtap;

/* Horizontally interpolated source row y (region-relative) at every output column. */
static void hrow(const uint8_t *src, int rw, int y, const xtap *tx, int ow, float *out)
{
    const uint8_t *r = src + (size_t)y * (size_t)rw * 3;
    for (int x = 0; x < ow; x++) {
        const uint8_t *a = r + tx[x].x0 * 3, *b = r + tx[x].x1 * 3;
        float w = tx[x].wx;
        out[x * 3] = a[0] + (b[0] - a[0]) * w;
        out[x * 3 + 1] = a[1] + (b[1] - a[1]) * w;
        out[x * 3 + 2] = a[2] + (b[2] - a[2]) * w;
    }
}

/* The horizontally interpolated rows y0 and y1 in h, from the two-row cache (tag: the row each
 * slot holds) or computed into the slot the other row of the pair does not use. */
static void row_pair(const uint8_t *src, int rw, const xtap *tx, int ow, float *cache[2], int tag[2], int y0, int y1,
                     const float *h[2])
{
    int want[2] = {y0, y1};
    for (int k = 0; k < 2; k++) {
        int slot = tag[0] == want[k] ? 0 : tag[1] == want[k] ? 1 : -1;
        if (slot < 0) {
            slot = k == 1 && h[0] == cache[0] ? 1 : k == 1 && h[0] == cache[1] ? 0 : (tag[0] == y1 ? 1 : 0);
            hrow(src, rw, want[k], tx, ow, cache[slot]);
            tag[slot] = want[k];
        }
        h[k] = cache[slot];
    }
}

/* src: rows [ry, ry + rh) and columns [rx, rx + rw) of a dw x dh RGB image; the box is in that
 * image's coordinates. Writes the output sample. Separable: each source row a sample needs is
 * interpolated across once (the last two are kept), then pairs of rows are blended; the
 * arithmetic is that of the direct 2 x 2 formula, term for term. */
static mr_status resample(const mr_image_opts *o, const uint8_t *src, int rx, int ry, int rw, int rh, int dw, int dh,
                          double bx, double by, double bw, double bh, int flip, void *out)
{
    const int ow = o->out_w, oh = o->out_h;
    uint8_t *o8 = out;
    float *of = out;
    const size_t plane = (size_t)ow * (size_t)oh;
    const int exact = bw == ow && bh == oh && bx == floor(bx) && by == floor(by);
    xtap *tx = mr_malloc((size_t)ow * sizeof *tx);
    float *rows = mr_malloc((size_t)ow * 6 * sizeof *rows + (size_t)ow * 3); /* two rows, a mirror buffer */
    if (!tx || !rows) {
        mr_free(tx);
        mr_free(rows);
        return MR_E_NOMEM;
    }
    for (int x = 0; x < ow; x++) {
        double fx = exact ? bx + x : bx + (x + 0.5) * bw / ow - 0.5;
        tx[x].outside = fx < -0.5 || fx > dw - 0.5;
        if (fx < 0) fx = 0;
        if (fx > dw - 1) fx = dw - 1;
        int x0 = (int)fx;
        tx[x].wx = (float)(fx - x0);
        tx[x].x0 = x0 - rx;
        tx[x].x1 = (x0 + 1 < dw ? x0 + 1 : x0) - rx;
    }
    int any_outside = 0;
    for (int x = 0; x < ow; x++) any_outside |= tx[x].outside;
    /* float32 output: the value of every byte, per channel, computed once by the formula of the
     * general loop below (so the values are the same) */
    float lut[3][256];
    if (o->to_float)
        for (int c = 0; c < 3; c++)
            for (int v = 0; v < 256; v++) lut[c][v] = ((float)v / 255.0f - o->mean[c]) / o->std[c];
    uint8_t *tmp = (uint8_t *)(rows + (size_t)ow * 6);
    float *cache[2] = {rows, rows + (size_t)ow * 3};
    int tag[2] = {-1, -1};
    for (int y = 0; y < oh; y++) {
        double fy = exact ? by + y : by + (y + 0.5) * bh / oh - 0.5;
        int outside_y = fy < -0.5 || fy > dh - 0.5;
        if (fy < 0) fy = 0;
        if (fy > dh - 1) fy = dh - 1;
        int y0 = (int)fy - ry, y1 = ((int)fy + 1 < dh ? (int)fy + 1 : (int)fy) - ry;
        float wy = (float)(fy - (int)fy);
        if (!outside_y && !any_outside) { /* the common case, in loops the compiler vectorizes */
            uint8_t *row8 = !o->to_float && !flip ? o8 + (size_t)y * ow * 3 : tmp;
            if (exact) { /* whole pixels, no weights: the source row is the output row (t0 + 0 + 0.5, truncated) */
                memcpy(row8, src + ((size_t)y0 * (size_t)rw + (size_t)tx[0].x0) * 3, (size_t)ow * 3);
            } else {
                const float *h[2];
                row_pair(src, rw, tx, ow, cache, tag, y0, y1, h);
                blend_row(h[0], h[1], wy, ow * 3, row8);
            }
            if (o->to_float) {
                float *p0 = of + (size_t)y * ow, *p1 = p0 + plane, *p2 = p1 + plane;
                for (int x = 0; x < ow; x++) {
                    int xo = flip ? ow - 1 - x : x;
                    p0[xo] = lut[0][row8[x * 3]];
                    p1[xo] = lut[1][row8[x * 3 + 1]];
                    p2[xo] = lut[2][row8[x * 3 + 2]];
                }
            } else if (flip) { /* blended in order, then mirrored pixel by pixel */
                uint8_t *dst = o8 + (size_t)y * ow * 3;
                for (int x = 0; x < ow; x++) memcpy(dst + (size_t)(ow - 1 - x) * 3, tmp + (size_t)x * 3, 3);
            }
            continue;
        }
        const float *h[2];
        row_pair(src, rw, tx, ow, cache, tag, y0, y1, h);
        for (int x = 0; x < ow; x++) {
            int xo = flip ? ow - 1 - x : x;
            for (int c = 0; c < 3; c++) {
                uint8_t v = 0;
                if (!outside_y && !tx[x].outside) {
                    float top = h[0][x * 3 + c], bot = h[1][x * 3 + c];
                    float f = top + (bot - top) * wy + 0.5f;
                    v = f <= 0 ? 0 : f >= 255 ? 255 : (uint8_t)f;
                }
                if (o->to_float) of[(size_t)c * plane + (size_t)y * ow + xo] = lut[c][v];
                else o8[((size_t)y * ow + xo) * 3 + c] = v;
            }
        }
    }
    (void)rh;
    mr_free(tx);
    mr_free(rows);
    return MR_OK;
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
    int k = 8; /* the smallest of 1/8, 1/4, 1/2 that still covers the output (libjpeg-turbo has SIMD
                  IDCTs for those; at 3/8, 5/8, ... its plain C ones made decoding slower, measured) */
    if (o->dct_scale)
        for (int t = 1; t < 8; t *= 2)
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
    mr_status rc = resample(o, region, (int)xoff, y0, rw, rh, dw, dh, bx, by, bw, bh, b.flip, out);
    mr_free(region);
    return rc == MR_OK ? MR_OK : MR_ERR(err, rc, "out of memory resampling a %dx%d JPEG", W, H);
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
    mr_status rc = resample(o, px, 0, 0, W, H, W, H, b.x, b.y, b.w, b.h, b.flip, out);
    mr_free(px);
    return rc == MR_OK ? MR_OK : MR_ERR(err, rc, "out of memory resampling a %dx%d PNG", W, H);
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
