#!/usr/bin/env bash
# make demo-images: runs examples/images end to end in a scratch copy (Fashion-MNIST as 70,000
# PNG files -> shards -> a CNN through millrace.torch.Loader -> test accuracy), then shows that
# a training-param change re-trains without re-writing or re-packing the images.
set -euo pipefail
MILLRACE=${1:?usage: run-demo.sh /path/to/millrace}
HERE=$(cd "$(dirname "$0")" && pwd)
BUILD=$(cd "$(dirname "$MILLRACE")" && pwd)
WORK=${MILLRACE_DEMO_DIR:-$BUILD/demo-images}
export PYTHONPATH=$BUILD/python${PYTHONPATH:+:$PYTHONPATH}
[ -f "$BUILD/python/millrace/__init__.py" ] || { echo "run-demo.sh: no Python package in $BUILD/python (make deps)" >&2; exit 2; }
[ -d /usr/share/datasets/fashion-mnist ] || { echo "run-demo.sh: no /usr/share/datasets/fashion-mnist (make deps)" >&2; exit 2; }
rm -rf "$WORK"
mkdir -p "$WORK"
cp "$HERE"/millrace.yaml "$HERE"/*.py "$WORK/"
cd "$WORK"
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
step "millrace dag"
"$MILLRACE" dag
step "millrace run   (70,000 PNG files written, packed into shards, a CNN trained on them, evaluated)"
"$MILLRACE" run
step "millrace show   (loss and accuracy per step, the loader's input-bound fraction per epoch, test accuracy)"
"$MILLRACE" show
step "millrace run -S train.lr=0.02   (re-trains and re-evaluates; the images are neither re-written nor re-packed)"
"$MILLRACE" run -S train.lr=0.02
printf '\ndemo finished in %s\n' "$WORK"
