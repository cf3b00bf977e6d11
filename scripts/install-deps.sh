#!/bin/sh
# Installs the Debian 12 packages millrace needs to build, test and run its demo.
# The python3-* packages are test oracles and benchmark peers (XGBoost,
# scikit-learn, pandas) and the doc tests' YAML reader (PyYAML); chromium
# renders the HTML report in its test; bc, time, curl and wrk serve the
# tests and bench/; python3-requests is the HTTP client of the serving
# protocols' test (tests/e2e/test_serve_protocols.sh). None of them is a
# runtime dependency of millrace.
# python3-dev builds the Python package (python/); python3-torch tests its
# PyTorch adapter and trains examples/images on dataset-fashion-mnist;
# python3-torchvision (--bench) is bench/images' DataLoader peer; valgrind
# (--bench) counts bench/serve's instructions per request (callgrind);
# libarchive-dev reads and writes WebDataset tar shards;
# libjpeg62-turbo-dev and libpng-dev decode images in the loader; python3-pil
# is the decoding oracle of its tests.
# slurm-wlm, slurmdbd, mariadb-server and munge make the one-node cluster of
# scripts/start-slurm.sh; openmpi-bin and libopenmpi-dev are its MPI (installed
# with them: slurmd must find PMIx when it starts).
# Idempotent: only calls apt-get for packages that are missing.
#
#   scripts/install-deps.sh           what make demo and make test need
#   scripts/install-deps.sh --bench   also every benchmark peer Debian packages
#                                     (make bench calls it this way): Optuna for
#                                     bench/tune, Snakemake for bench/cluster. npm peers (DuckDB, ONNX Runtime) are
#                                     installed by the benches themselves, LightGBM
#                                     comes from ../shared/peers
#   scripts/install-deps.sh --fuzz    also clang and its runtimes (libFuzzer, the
#                                     sanitizers: libclang-rt-dev, only a Recommends
#                                     of clang), which build the libFuzzer targets
#                                     (tests/fuzz; make test replays their corpora
#                                     with any compiler and does not need it)
set -eu

BENCH=0
FUZZ=0
for a in "$@"; do
    case "$a" in
    --bench) BENCH=1 ;;
    --fuzz) FUZZ=1 ;;
    *) echo "usage: $0 [--bench] [--fuzz]" >&2; exit 2 ;;
    esac
done

PKGS="build-essential cmake pkg-config git \
libyaml-dev libxxhash-dev libsqlite3-dev libjansson-dev libcmocka-dev \
libsnappy-dev libzstd-dev liblz4-dev zlib1g-dev libmicrohttpd-dev libarchive-dev libjpeg62-turbo-dev libpng-dev libhiredis-dev \
libcurl4-openssl-dev libssl-dev libexpat1-dev python3-boto3 awscli \
openmpi-bin libopenmpi-dev slurm-wlm slurmdbd mariadb-server munge \
sqlite3 python3 procps coreutils redis-server \
python3-dev python3-pil python3-numpy python3-pandas python3-sklearn python3-xgboost python3-yaml python3-torch python3-requests dataset-fashion-mnist curl wrk bc time \
chromium"
if [ "$BENCH" = 1 ]; then
    PKGS="$PKGS python3-optuna python3-torchvision valgrind snakemake"
fi
if [ "$FUZZ" = 1 ]; then
    PKGS="$PKGS clang libclang-rt-dev"
fi

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

# Node.js + npm run the test oracles from the npm registry (DuckDB, ONNX
# Runtime); a machine that already has them (any version >= 18) keeps its own.
if ! command -v npm >/dev/null 2>&1; then
    missing="$missing nodejs npm"
fi

if [ -z "$missing" ]; then
    echo "install-deps: all packages present"
    exit 0
fi

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# shellcheck disable=SC2086
$SUDO apt-get install -y -qq --no-install-recommends $missing
