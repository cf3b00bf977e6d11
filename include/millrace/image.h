/* Image decoding and augmentation for the loader (docs/data.md, "Images in
 * the loader"): JPEG through libjpeg-turbo, PNG through libpng, to RGB; then
 * one geometric step to a fixed output size, an optional horizontal flip,
 * and the output layout.
 *
 *   geometry (one):  resize            the whole image to out_h x out_w
 *                    center_crop       the centre out_h x out_w, after an
 *                                      optional resize of the shorter side
 *                                      to resize_shorter (zeros where the
 *                                      image is smaller)
 *                    random_resized_crop  a box of scale (area fraction) and
 *                                      ratio (w/h) drawn as torchvision
 *                                      draws it (10 tries, then the centre),
 *                                      resized to out_h x out_w
 *   hflip            with probability hflip
 *   output           uint8 H x W x 3 (NHWC), or float32 3 x H x W (NCHW) of
 *                    (v / 255 - mean[c]) / std[c]
 *
 * Resampling is bilinear with half-pixel centres (align_corners false); a
 * box the size of the output is copied exactly. A JPEG is decoded at the
 * smallest DCT scale of 1/8, 1/4 and 1/2 at which the box still covers the
 * output, and only the rows and iMCU columns of the box are decoded
 * (jpeg_crop_scanline, jpeg_skip_scanlines); dct_scale = 0 decodes at full
 * size. Every random choice of a sample is a pure function of (seed, epoch,
 * index): mr_image_params gives them.
 *
 * Example (given const void *jpeg, size_t len):
 *
 *   mr_image_opts o;
 *   mr_image_opts_init(&o);
 *   o.geometry = MR_IMG_RANDOM_RESIZED_CROP;
 *   o.out_h = o.out_w = 224;
 *   o.hflip = 0.5;
 *   uint8_t *px = mr_malloc(mr_image_out_bytes(&o));   // 224 x 224 x 3
 *   if (px && mr_image_decode(&o, jpeg, len, 42, 0, 17, px, &err) != MR_OK) mr_log_error(&err);
 *   mr_free(px);
 */
#ifndef MILLRACE_IMAGE_H
#define MILLRACE_IMAGE_H

#include "millrace/core.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum mr_img_format { MR_IMG_AUTO = 0, MR_IMG_JPEG = 1, MR_IMG_PNG = 2 } mr_img_format;
typedef enum mr_img_geometry {
    MR_IMG_RESIZE = 1,
    MR_IMG_CENTER_CROP = 2,
    MR_IMG_RANDOM_RESIZED_CROP = 3,
} mr_img_geometry;

typedef struct mr_image_opts {
    mr_img_format format;      /* AUTO: by the first bytes */
    mr_img_geometry geometry;  /* required: the output has one size */
    int out_h, out_w;          /* the output size, > 0 */
    int resize_shorter;        /* CENTER_CROP: first resize the shorter side to this (0 = no) */
    double scale[2], ratio[2]; /* RANDOM_RESIZED_CROP; init: 0.08..1 and 3/4..4/3 */
    double hflip;              /* probability in [0, 1] */
    int to_float;              /* 1: float32 CHW normalized; 0: uint8 HWC */
    float mean[3], std[3];     /* to_float; init: 0 and 1 */
    int dct_scale;             /* JPEG: decode at a reduced DCT scale when it covers the output; init 1 */
} mr_image_opts;

void mr_image_opts_init(mr_image_opts *o);
/* Checks the options: MR_E_INVALID_ARG naming the bad one. */
mr_status mr_image_opts_check(const mr_image_opts *o, mr_error *err);
/* Bytes of one output sample. */
size_t mr_image_out_bytes(const mr_image_opts *o);

/* The random choices of sample `index` for an image of width x height: the
 * source box (x, y, w, h: may extend past the image for a center crop) and
 * the flip. */
typedef struct mr_image_box {
    double x, y, w, h;
    int flip;
} mr_image_box;
void mr_image_params(const mr_image_opts *o, uint64_t seed, uint64_t epoch, uint64_t index, int width, int height,
                     mr_image_box *out);

/* Decodes data[0..len) and writes the sample into out (mr_image_out_bytes
 * bytes). MR_E_CORRUPT (not a JPEG/PNG, or a broken one: the decoder's
 * message), MR_E_LIMIT (over 2^26 pixels), MR_E_NOMEM. Thread-safe. */
mr_status mr_image_decode(const mr_image_opts *o, const void *data, size_t len, uint64_t seed, uint64_t epoch,
                          uint64_t index, void *out, mr_error *err);

/* The image's size from its header (MR_E_CORRUPT when it is neither format). */
mr_status mr_image_size(const void *data, size_t len, int *width, int *height, mr_error *err);

#ifdef __cplusplus
}
#endif
#endif
