#!/usr/bin/env bash
# Runs examples/adult in a scratch copy next to the shared data folder it reads.
set -euo pipefail
MILLRACE=${1:?usage: run.sh /path/to/millrace [WORKDIR]}
MILLRACE=$(cd "$(dirname "$MILLRACE")" && pwd)/$(basename "$MILLRACE")
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${MILLRACE_SHARED:-$(cd "$HERE/../../.." && pwd)/shared}
[ -f "$SHARED/data/adult/adult.data" ] || { echo "adult example: $SHARED/data/adult not found" >&2; exit 2; }
WORK=${2:-$(mktemp -d /tmp/millrace-adult.XXXXXX)}
mkdir -p "$WORK"
cp "$HERE/millrace.yaml" "$WORK/"
cd "$WORK"
"$MILLRACE" run -S "shared=$SHARED/data/adult"
"$MILLRACE" show
echo "report: $WORK/out/report/report.html"
