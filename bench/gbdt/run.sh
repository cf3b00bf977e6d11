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
# run says so. The XGBoost keys, for the first setting run:
#   time_vs_xgboost=<(bin+train) ratio> auc_minus_xgboost=<diff>
#   predict_vs_xgboost=<rows/s ratio> rss_vs_xgboost=<ratio>
# (targets: time <= 0.5, auc >= -0.001, predict >= 2, rss < 0.5).
# Then, when ../shared/peers/lightgbm-4.6.0/lightgbm exists (it says so when
# not), `millrace train` and the LightGBM CLI as whole processes on the same
# CSV: big, small, and small with a core held by `yes`, with the keys
#   time_vs_lightgbm=<big> small_vs_lightgbm=<small> contended_vs_lightgbm=<ratio>
#   rss_vs_lightgbm=<big> auc_minus_lightgbm=<big>
# (issue 19 targets: time <= 0.6 in both settings, rss <= 1.0, auc >= -0.001).
# Ends with one line: RESULT gbdt <the LightGBM keys> <the XGBoost keys>.
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
    [ -n "$first_result" ] || first_result="time_vs_xgboost=$t_ratio auc_minus_xgboost=$auc_diff predict_vs_xgboost=$p_ratio rss_vs_xgboost=$r_ratio"
done

# ---- LightGBM: the whole process from the same CSV --------------------------------
# `millrace train` and the LightGBM 4.6.0 command-line program (../shared/peers)
# each read the same train.csv (label first, NaN as "nan"), bin and train with
# the same parameters on THREADS threads; wall time and peak RSS are of the
# whole training process, AUC of each model's predictions of test.csv. Three
# runs: big, small, and small again with `yes > /dev/null` holding one core.
lgb=${LIGHTGBM:-$shared/peers/lightgbm-4.6.0/lightgbm}
mr=$(dirname "$tool")/../millrace
lgb_result=""
if [ ! -x "$lgb" ]; then
    echo "# LightGBM NOT RUN: no $lgb (../shared/peers/lightgbm-4.6.0; see its README)"
elif [ ! -x "$mr" ]; then
    echo "# LightGBM NOT RUN: no millrace binary at $mr"
else
    mr=$(cd "$(dirname "$mr")" && pwd)/millrace
    csvd=/tmp/millrace-bench-gbdt-csv
    [ "$rows" = 1000000 ] || csvd=/tmp/millrace-bench-gbdt-csv-$rows
    if [ ! -f "$csvd/train.csv" ] || [ ! -f "$csvd/test.csv" ]; then
        echo "# generating the CSV files of the same $rows + $test_rows rows into $csvd"
        "$PY" "$gen" "$csvd" --n-train "$rows" --n-test "$test_rows" >/dev/null || exit 1
    fi
    elapsed() { "$PY" -c "import time; print(round(time.monotonic() - $1, 3))"; }
    now() { "$PY" -c "import time; print(time.monotonic())"; }
    printf '%-10s %-9s %9s %9s %9s\n' setting system wall_s auc rss_MB
    for s in big small contended; do
        case $s in big) rounds=500 leaves=255 ;; *) rounds=100 leaves=63 ;; esac
        hog=""
        if [ $s = contended ]; then
            yes >/dev/null &
            hog=$!
        fi
        t0=$(now)
        /usr/bin/time -v "$mr" train "$csvd/train.csv" --label label -j "$THREADS" -p objective=binary \
            -p num_iterations=$rounds -p learning_rate=0.1 -p num_leaves=$leaves -p max_bin=255 -p min_data_in_leaf=20 \
            -o "$out/mr_$s.bin" >"$out/mrl.$s" 2>"$out/mrl.$s.time" || { [ -z "$hog" ] || kill $hog; cat "$out/mrl.$s.time"; exit 1; }
        mr_wall=$(elapsed "$t0")
        t0=$(now)
        /usr/bin/time -v "$lgb" task=train objective=binary data="$csvd/train.csv" header=true label_column=0 \
            num_iterations=$rounds learning_rate=0.1 num_leaves=$leaves max_bin=255 min_data_in_leaf=20 \
            num_threads="$THREADS" output_model="$out/lgb_$s.txt" >"$out/lgb.$s" 2>"$out/lgb.$s.time" ||
            { [ -z "$hog" ] || kill $hog; cat "$out/lgb.$s" "$out/lgb.$s.time"; exit 1; }
        lgb_wall=$(elapsed "$t0")
        [ -z "$hog" ] || kill $hog
        "$mr" model predict "$out/mr_$s.bin" "$csvd/test.csv" -o "$out/mr_$s.pred.csv" >/dev/null || exit 1
        "$lgb" task=predict data="$csvd/test.csv" header=true label_column=0 input_model="$out/lgb_$s.txt" \
            output_result="$out/lgb_$s.pred.txt" num_threads="$THREADS" >/dev/null 2>&1 || exit 1
        mr_auc=$("$PY" "$here/auc.py" "$csvd/test.csv" "$out/mr_$s.pred.csv" --column prediction) || exit 1
        lgb_auc=$("$PY" "$here/auc.py" "$csvd/test.csv" "$out/lgb_$s.pred.txt") || exit 1
        mr_rss=$(rss_kb "$out/mrl.$s.time") lgb_rss=$(rss_kb "$out/lgb.$s.time")
        printf '%-10s %-9s %9s %9s %9s\n' $s millrace "$mr_wall" "$mr_auc" "$(calc "round($mr_rss/1024)")"
        printf '%-10s %-9s %9s %9s %9s\n' $s lightgbm "$lgb_wall" "$lgb_auc" "$(calc "round($lgb_rss/1024)")"
        eval "r_$s=\$(calc \"round($mr_wall/$lgb_wall,3)\")"
        if [ $s = big ]; then
            rss_r=$(calc "round($mr_rss/$lgb_rss,3)")
            auc_d=$(calc "round($mr_auc-$lgb_auc,4)")
        fi
    done
    echo "# lightgbm: big time ratio $r_big, small $r_small, contended $r_contended, rss ratio $rss_r, auc diff $auc_d" \
        "(targets: time <= 0.6 both settings, rss <= 1.0, auc >= -0.001)"
    lgb_result="time_vs_lightgbm=$r_big small_vs_lightgbm=$r_small contended_vs_lightgbm=$r_contended rss_vs_lightgbm=$rss_r auc_minus_lightgbm=$auc_d"
fi
echo "RESULT gbdt ${lgb_result:+$lgb_result }$first_result"
