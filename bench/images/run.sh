#!/usr/bin/env bash
# bench/images: feeding a training loop from JPEGs (issue 13). Synthetic photos-like JPEGs
# (512 x 384, quality 90, one file per sample, BENCH_IMAGES of them, default 20,000, as issue 13 sets) are packed
# once with `millrace data ingest --files`; then, on the same images and the same work (decode,
# random-resized-crop 224, horizontal flip, uint8 batches of 256):
#   - millrace's Python loader (2 threads) against torch's DataLoader (num_workers=2, Pillow +
#     torchvision transforms) over the individual files: samples/s delivered to a loop that does
#     no work -> vs_dataloader;
#   - millrace with 1 loader thread: images per CPU-second -> jpeg_per_core (FFCV reports ~650 per
#     physical core for this), with and without the DCT-scaled decode;
#   - peak RSS and time to the first batch at 1, 2 and 8 loader threads;
#   - the input-bound fraction (loader wait / step time) of a small CNN trained on the JPEG batches
#     (jpeg_cnn_input_bound), and of the images example's training loop on the Fashion-MNIST
#     shards (input_bound: the issue's target, under 5%).
#   - the 70,000 Fashion-MNIST PNGs (28 x 28) decoded to uint8 batches, millrace against the
#     DataLoader over the files -> png_vs_dataloader.
# Ends with RESULT images vs_dataloader=... jpeg_per_core=... dct_gain=... input_bound=... png_vs_dataloader=...
#   jpeg_cnn_input_bound=...
BENCH=images
. "$(dirname "$0")/../lib.sh" "$@"
N=${BENCH_IMAGES:-20000}
IMG=$DATA/images_$N
export PYTHONPATH=$BUILD/python
[ -f "$BUILD/python/millrace/__init__.py" ] || bench_fail "no Python package in $BUILD/python (python3-dev: make deps)"
if [ ! -f "$IMG/done" ]; then
    echo "generating $N JPEGs in $IMG ..." >&2
    rm -rf "$IMG" && mkdir -p "$IMG"
    "$PY" "$SRC/bench/images/bench.py" gen "$IMG/files" "$N" >&2 || bench_fail "generator failed"
    touch "$IMG/done"
fi
if [ ! -f "$IMG/ds/manifest.json" ]; then
    "$MR" data ingest --files "$IMG/files/**/*.jpg" "$IMG/ds" --label-from parent-dir --force >&2 ||
        bench_fail "ingest --files failed"
fi
# The 70,000 Fashion-MNIST PNGs (Debian's dataset-fashion-mnist), written by the images example's script.
FM=$DATA/fashion_png
if [ ! -f "$FM/done" ]; then
    rm -rf "$FM" && mkdir -p "$FM"
    echo '{"data": {"per_class_train": 6000, "per_class_test": 1000}}' >"$FM/params.json"
    MILLRACE_PARAMS_FILE=$FM/params.json "$PY" "$SRC/examples/images/write_pngs.py" "$FM/png" >&2 ||
        bench_fail "writing the Fashion-MNIST PNGs failed (dataset-fashion-mnist: make deps)"
    mkdir -p "$FM/all" && mv "$FM/png/train"/* "$FM/all/" && for d in "$FM/png/test"/*; do
        for f in "$d"/*; do mv "$f" "$FM/all/$(basename "$d")/t$(basename "$f")"; done; done &&
        rm -rf "$FM/png" || bench_fail "arranging the PNGs failed"
    touch "$FM/done"
fi
if [ ! -f "$FM/ds/manifest.json" ]; then
    "$MR" data ingest --files "$FM/all/**/*.png" "$FM/ds" --label-from parent-dir --force >&2 || bench_fail "ingest failed"
fi
# Both sides read from the page cache: every file and every shard once before timing.
find "$IMG/files" "$IMG/ds" "$FM/all" "$FM/ds" -type f -print0 | xargs -0 cat >/dev/null
"$PY" "$SRC/bench/images/bench.py" run "$IMG/files" "$IMG/ds" "$FM/all" "$FM/ds" || bench_fail "the benchmark failed"
