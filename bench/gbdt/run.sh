#!/usr/bin/env bash
# GBDT benchmark: millrace (tests/tools/mr_gbdt_tool) vs XGBoost (Debian
# python3-xgboost, tree_method=hist, grow_policy=lossguide, max_depth=0) on the
# shared Higgs-like set, both on 2 threads, in the same run.
#
#   bench/gbdt/run.sh BUILD_DIR|MR_GBDT_TOOL [setting...]
#
# Settings: "big" = 500 rounds, lr 0.1, 255 leaves, max_bin 255,
# min_data_in_leaf 20 (XGBoost: max_leaves 255, its other defaults); "small" =
# 100 rounds, 63 leaves. Default: both. Data: 1M train + 200k test rows from
# ../shared/bench/gen_higgs_like.py, generated once into
# /tmp/millrace-bench-gbdt (BENCH_ROWS=N shrinks the train set; test = N/5).
# Reported: binning and training seconds, test AUC, batch predict rows/s
# (200k rows, 2 threads, best of three batches on each side) and peak RSS of each whole process (/usr/bin/time -v).
# Training CPU seconds (all threads) are printed too: on a shared machine they
# move less than wall time. Validation first: millrace's AUC must be within 0.001 of XGBoost's or the
# run says so. Ends with
#   RESULT gbdt time_vs_xgboost=<(bin+train) ratio> auc_minus_xgboost=<diff>
#          predict_vs_xgboost=<rows/s ratio> rss_vs_xgboost=<ratio>
# for the first setting run. Targets: time <= 0.5, auc >= -0.001, predict >= 2,
# rss < 0.5.
set -u
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
arg=${1:-$repo/build}
shift || true
if [ -d "$arg" ]; then
    tool=$arg/tests/mr_gbdt_tool
elif [ "$(basename "$arg")" = millrace ]; then
    tool=$(dirname "$arg")/tests/mr_gbdt_tool
else
    tool=$arg
fi
[ -x "$tool" ] || { echo "bench/gbdt: no mr_gbdt_tool at $tool (build the tests/ targets)" >&2; exit 2; }
PY=${MR_PYTHON:-/usr/bin/python3}
"$PY" -c 'import xgboost, numpy' 2>/dev/null || { echo "bench/gbdt: $PY needs python3-xgboost and python3-numpy" >&2; exit 2; }
shared=${MILLRACE_SHARED:-$repo/../shared}
gen=$shared/bench/gen_higgs_like.py
[ -f "$gen" ] || { echo "bench/gbdt: $gen not found (../shared is absent)" >&2; exit 2; }
THREADS=${BENCH_THREADS:-2}
rows=${BENCH_ROWS:-1000000}
test_rows=$((rows / 5))
data=/tmp/millrace-bench-gbdt
[ "$rows" = 1000000 ] || data=/tmp/millrace-bench-gbdt-$rows
if ! "$PY" -c "import json,sys; m=json.load(open('$data/meta.json')); sys.exit(0 if m['n_train']==$rows and m['n_test']==$test_rows else 1)" 2>/dev/null \
    || [ ! -f "$data/train_X.f32" ]; then
    echo "# generating $rows + $test_rows rows into $data"
    "$PY" "$gen" "$data" --n-train "$rows" --n-test "$test_rows" --no-csv >/dev/null || exit 1
fi
train="f32:$data/train_X.f32:$data/train_y.f32:28"
test="f32:$data/test_X.f32:$data/test_y.f32:28"
settings=("$@")
[ ${#settings[@]} -gt 0 ] || settings=(big small)
out=$(mktemp -d /tmp/millrace-bench-gbdt-run.XXXXXX)
trap 'rm -rf "$out"' EXIT

val() { sed -n "s/^$2=//p" "$1" | head -1; }
rss_kb() { sed -n 's/.*Maximum resident set size (kbytes): //p' "$1" | head -1; }
calc() { "$PY" -c "print($1)"; }

echo "# millrace tool: $tool"
echo "# xgboost: $("$PY" -c 'import xgboost; print(xgboost.__version__)'); threads: $THREADS; train rows: $rows; test rows: $test_rows"
printf '%-6s %-9s %8s %9s %9s %14s %9s\n' setting system bin_s train_s auc predict_rows/s rss_MB
first_result=""
for s in "${settings[@]}"; do
    case $s in
    big) rounds=500 leaves=255 ;;
    small) rounds=100 leaves=63 ;;
    *) echo "unknown setting $s (big, small)" >&2; exit 2 ;;
    esac
    /usr/bin/time -v "$tool" run --train "$train" --test "$test" --threads "$THREADS" \
        -p objective=binary -p num_iterations=$rounds -p learning_rate=0.1 -p num_leaves=$leaves \
        -p max_bin=255 -p min_data_in_leaf=20 >"$out/mr.$s" 2>"$out/mr.$s.time" || { cat "$out/mr.$s.time"; exit 1; }
    /usr/bin/time -v "$PY" "$here/xgb_run.py" --train "$train" --test "$test" --threads "$THREADS" \
        --objective binary --rounds $rounds --lr 0.1 --leaves $leaves --max-bin 255 \
        >"$out/xgb.$s" 2>"$out/xgb.$s.time" || { cat "$out/xgb.$s.time"; exit 1; }
    for sys in mr xgb; do
        f=$out/$sys.$s
        printf '%-6s %-9s %8s %9s %9s %14s %9s\n' "$s" "$([ $sys = mr ] && echo millrace || echo xgboost)" \
            "$(val "$f" bin_s)" "$(val "$f" train_s)" "$(val "$f" auc)" "$(val "$f" predict_rows_per_s)" \
            "$(calc "round($(rss_kb "$f.time")/1024)")"
    done
    m=$out/mr.$s x=$out/xgb.$s
    t_ratio=$(calc "round(($(val "$m" bin_s)+$(val "$m" train_s))/($(val "$x" bin_s)+$(val "$x" train_s)),3)")
    tr_ratio=$(calc "round($(val "$m" train_s)/$(val "$x" train_s),3)")
    cpu_ratio=$(calc "round($(val "$m" train_cpu_s)/$(val "$x" train_cpu_s),3)")
    auc_diff=$(calc "round($(val "$m" auc)-$(val "$x" auc),4)")
    p_ratio=$(calc "round($(val "$m" predict_rows_per_s)/$(val "$x" predict_rows_per_s),2)")
    r_ratio=$(calc "round($(rss_kb "$m.time")/$(rss_kb "$x.time"),3)")
    ok=$(calc "'ok' if $auc_diff >= -0.001 else 'AUC BELOW XGBOOST - 0.001'")
    echo "# $s: (bin+train) time ratio $t_ratio, train-only ratio $tr_ratio, train CPU-seconds ratio $cpu_ratio, auc diff $auc_diff ($ok), predict ratio $p_ratio, rss ratio $r_ratio"
    [ -n "$first_result" ] || first_result="RESULT gbdt time_vs_xgboost=$t_ratio auc_minus_xgboost=$auc_diff predict_vs_xgboost=$p_ratio rss_vs_xgboost=$r_ratio"
done
echo "$first_result"
