#!/bin/sh
# Installs the Debian 12 packages millrace needs to build, test and run its demo
# (python3-xgboost, -pandas, -numpy and bc: the GBDT oracle test; time: bench/).
# Idempotent: only calls apt-get for packages that are missing.
set -eu

PKGS="build-essential cmake pkg-config git \
libyaml-dev libxxhash-dev libsqlite3-dev libjansson-dev libcmocka-dev \
sqlite3 python3 procps coreutils \
python3-numpy python3-pandas python3-xgboost bc time"

missing=""
for p in $PKGS; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $p"
    fi
done

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
