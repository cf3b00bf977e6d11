#!/usr/bin/env bash
# Runs examples/recsys in a scratch copy: the MovieLens ratings of the
# shared data folder (or, when it is absent or MILLRACE_RECSYS_GENERATE=1,
# ratings generated here with a taste per user and an appeal per movie),
# then serves the packaged model and asks it about two (user, movie) pairs
# by id: their features come from the two online stores.
#
# usage: examples/recsys/run.sh /path/to/millrace [WORKDIR]
set -euo pipefail
MILLRACE=${1:?usage: run.sh /path/to/millrace [WORKDIR]}
MILLRACE=$(cd "$(dirname "$MILLRACE")" && pwd)/$(basename "$MILLRACE")
HERE=$(cd "$(dirname "$0")" && pwd)
SHARED=${MILLRACE_SHARED:-$(cd "$HERE/../../.." && pwd)/shared}
WORK=${2:-$(mktemp -d /tmp/millrace-recsys.XXXXXX)}
mkdir -p "$WORK/data"
cp "$HERE/millrace.yaml" "$WORK/"
src=$SHARED/data/ctr_recsys/movielens-latest-small/ratings.csv
if [ -f "$src" ] && [ "${MILLRACE_RECSYS_GENERATE:-0}" != 1 ]; then
    cp "$src" "$WORK/data/ratings.csv"
    echo "recsys: the MovieLens ratings of $src"
else
    # 400 users and 600 movies over two years; a rating is the user's generosity plus the movie's appeal,
    # plus noise
    awk 'BEGIN { srand(42); print "userId,movieId,rating,timestamp";
      for (u = 1; u <= 400; u++) taste[u] = rand();
      for (m = 1; m <= 600; m++) appeal[m] = rand();
      for (i = 0; i < 40000; i++) {
          u = 1 + int(rand() * 400); m = 1 + int(rand() * rand() * 600);
          r = 0.5 + 2.25 * (taste[u] + appeal[m]) + (rand() - 0.5) * 1.5; r = r < 0.5 ? 0.5 : r > 5 ? 5 : int(r * 2) / 2;
          printf "%d,%d,%.1f,%d\n", u, m, r, 1500000000 + int(rand() * 63072000) } }' >"$WORK/data/ratings.csv"
    echo "recsys: generated ratings (no $src, or MILLRACE_RECSYS_GENERATE=1)"
fi
cd "$WORK"
"$MILLRACE" run
"$MILLRACE" show
# the model served by user and movie id
rm -f port.txt
"$MILLRACE" serve out/package/model.mrb --port 0 --port-file port.txt >serve.log 2>&1 &
server=$!
trap 'kill "$server" 2>/dev/null || true' EXIT
for _ in $(seq 100); do [ -s port.txt ] && break; sleep 0.1; done
[ -s port.txt ] || { cat serve.log >&2; exit 1; }
curl -sf -w '\n' -d '{"rows": [{"user": 1, "movie": 1}, {"user": 1, "movie": 50}], "include_features": true}' \
    "http://127.0.0.1:$(cat port.txt)/v1/predict" | tee answer.json
kill -TERM "$server"
wait "$server"
trap - EXIT
echo "recsys: $WORK (the answer above is in answer.json)"
