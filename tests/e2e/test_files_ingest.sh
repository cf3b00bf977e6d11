#!/usr/bin/env bash
# `millrace data ingest --files` (issue 13): a folder of files becomes a dataset of one row per
# file — path, bytes, label — that DuckDB reads back equal byte for byte; an ingest killed with
# kill -9 (at a moment the test does not choose; unit.test_files kills it at an exact shard)
# continues where it stopped and ends equal to an uninterrupted one; an unreadable file and a link
# out of the folder stop the ingest naming the file, or are left out and listed with
# --on-error skip; WebDataset tar shards (GNU tar's) ingest and datasets export as such shards;
# the ingest op packs the files in a pipeline, cached until a file changes.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws files)
cd "$ws" || fail "cd"
mkdir -p imgs/cat imgs/dog/puppy imgs/.cache
for i in 1 2 3 4 5 6; do
    head -c $((i * 997)) /dev/urandom >"imgs/cat/c$i.jpg"
    head -c $((i * 501)) /dev/urandom >"imgs/dog/d$i.jpg"
done
printf 'tiny' >imgs/dog/puppy/p1.jpg
: >imgs/dog/empty.jpg
printf 'hidden' >imgs/.cache/h.jpg
printf 'notes' >imgs/cat/notes.txt

expect_exit 0 mr data ingest --files 'imgs/**/*.jpg' out --label-from parent-dir --rows-per-shard 5 --json
assert_eq "$(json 'd["files_matched"], d["rows_written"], d["shards"], d["files_skipped"]')" \
    "(14, 14, 3, 0)" "14 files (no hidden folder, no .txt) in shards of 5"
assert_no_file out.partial "the work directory is gone once the dataset is in place"
expect_exit 0 mr data inspect out
assert_match "$T_OUT" "image +binary" "the bytes column is binary"

# DuckDB reads every file's bytes back, in path order, with its folder as label
duckdb_setup "files ingest" describe.mjs
for f in $(cd imgs && find . -name '*.jpg' ! -path './.cache/*' | sed 's|^\./||' | LC_ALL=C sort); do
    printf '%s|%s|%s\n' "$f" "$(od -An -v -tx1 "imgs/$f" | tr -d ' \n')" "$(basename "$(dirname "$f")")"
done >want.txt
cat >files.mjs <<'EOF'
import { DuckDBInstance } from '@duckdb/node-api';
const db = await (await DuckDBInstance.create(':memory:')).connect();
const q = `SELECT path, lower(hex(image)), label FROM read_parquet('${process.argv[2]}/*.parquet') ORDER BY path`;
for (const r of (await db.runAndReadAll(q)).getRows()) console.log(r.join('|'));
EOF
cp files.mjs "$DUCK/files.mjs"
run_cmd node "$DUCK/files.mjs" "$ws/out"
assert_eq "$T_RC" 0 "DuckDB reads the shards ($T_ERR)"
assert_eq "$T_OUT" "$(cat want.txt)" "DuckDB sees each file's bytes, path and parent folder"

# a labels file joins by path; rows it lacks get nulls, counted
printf 'path,label,split\ncat/c1.jpg,1,train\ndog/d2.jpg,0,test\n' >labels.csv
expect_exit 0 mr data ingest --files imgs out2 --labels labels.csv --json
assert_eq "$(json 'd["rows_written"], d["labels_missing"]')" "(15, 13)" \
    "a plain folder packs every file under it; 13 have no labels row"
expect_exit 0 mr data head out2 --filter "split = 'test'" --columns path,label,split
assert_contains "$T_OUT" "dog/d2.jpg" "the label columns are joined by path"

# shards are published one by one: shards of 3 files, the same command twice
expect_exit 0 mr data ingest --files 'imgs/**/*.jpg' fresh --rows-per-shard 3 --json
assert_eq "$(json 'd["shards"], d["shards_resumed"]')" "(5, 0)" "14 files in 5 shards, none resumed"

# a real kill -9 while a larger ingest runs: whenever it lands, the rerun equals a clean run
mkdir big
(cd big && head -c 60M /dev/urandom | split -b 150k -a 3 - part_)
"$MR_BIN" data ingest --files 'big/*' killed --row-group-bytes 1000000 --codec gzip -j 1 >kill.log 2>&1 & # gzip: slow enough to be caught
pid=$!
bg_track $pid
wait_for "the ingest has published a few shards" 60 test -f killed.partial/shard-00003/manifest.json
kill -9 $pid
wait $pid 2>/dev/null
assert_no_file killed "a killed ingest publishes nothing"
expect_exit 0 mr data ingest --files 'big/*' killed --row-group-bytes 1000000 --codec gzip --json
resumed=$(json 'd["shards_resumed"]')
[ "$resumed" -ge 4 ] || fail "expected at least 4 shards kept after the kill, got $resumed"
pass "a kill -9 keeps the shards published before it ($resumed)"
expect_exit 0 mr data ingest --files 'big/*' clean --row-group-bytes 1000000 --codec gzip
run_cmd diff -r killed clean
assert_eq "$T_RC" 0 "after a real kill -9 the continued dataset equals a clean one"

# a link out of the folder: refused (exit 2, named), or left out and listed
ln -s "$ws/labels.csv" imgs/cat/zz.jpg
expect_exit 2 mr data ingest --files 'imgs/**/*.jpg' esc
assert_contains "$T_ERR" "imgs/cat/zz.jpg: a symbolic link to a file outside the base directory" "the escaping link is named"
assert_no_file esc "nothing is published"
expect_exit 0 mr data ingest --files 'imgs/**/*.jpg' esc --on-error skip --json
assert_eq "$(json 'd["rows_written"], d["files_skipped"], d["skipped"][0]')" \
    "(14, 1, 'cat/zz.jpg: a symbolic link to a file outside the base directory')" "skip leaves the link out and lists it"
rm imgs/cat/zz.jpg

# an unreadable file (root reads everything: the check runs as nobody)
chmod 000 imgs/dog/d3.jpg
as_user=()
if [ "$(id -u)" = 0 ]; then
    chmod a+rx "$T_ROOT" "$ws"
    mkdir -m 777 nb
    as_user=(setpriv --reuid=nobody --regid=nogroup --clear-groups)
else
    mkdir nb
fi
expect_exit 1 "${as_user[@]}" "$MR_BIN" data ingest --files 'imgs/**/*.jpg' nb/ds
assert_contains "$T_ERR" "imgs/dog/d3.jpg: cannot read: Permission denied" "the unreadable file is named"
expect_exit 0 "${as_user[@]}" "$MR_BIN" data ingest --files 'imgs/**/*.jpg' nb/ds --on-error skip
assert_contains "$T_ERR" "skipped dog/d3.jpg: Permission denied" "skip lists it with its reason"
assert_contains "$T_OUT" "1 files skipped" "and counts it"
chmod 644 imgs/dog/d3.jpg

# WebDataset: a shard made with GNU tar ingests (a row per sample, a column per extension), and
# a dataset exports as a shard that Python's tarfile reads back equal to the files
mkdir -p wds/train
for i in 0 1 2; do
    head -c $((300 + i)) /dev/urandom >"wds/train/s$i.jpg"
    printf '%s' "$((i % 2))" >"wds/train/s$i.cls"
done
printf 'a caption' >wds/train/s1.txt
tar --sort=name -cf shard.tar -C wds train
expect_exit 0 mr data ingest shard.tar wds_ds --json
assert_eq "$(json 'd["rows_written"]')" "3" "three samples"
expect_exit 0 mr data head wds_ds --columns __key__,cls,txt
assert_eq "$(printf '%s\n' "$T_OUT" | tr -s ' ' | sed 's/ $//')" "__key__ cls txt
train/s0 0 NULL
train/s1 1 a caption
train/s2 0 NULL" "keys, text members, and a sample without .txt"
expect_exit 0 mr data inspect wds_ds
assert_match "$T_OUT" "jpg +binary" "an image member is binary"
expect_exit 0 mr data export out export.tar --columns path,image,label
expect_exit 0 mr data export out export2.tar --columns path,image,label
run_cmd cmp export.tar export2.tar
assert_eq "$T_RC" 0 "the same dataset exports to the same bytes"
run_cmd /usr/bin/python3 -c '
import sys, tarfile
t = tarfile.open(sys.argv[1])
names = t.getnames()
bad = [n for n in names if n.endswith(".image") and t.extractfile(n).read() != open("imgs/" + n[:-6] + ".jpg", "rb").read()]
print(len(names), names[0], names[1], len(bad))
' export.tar
assert_eq "$T_OUT" "28 cat/c1.image cat/c1.label 0" "tarfile reads 14 samples of KEY.image + KEY.label, bytes equal"
expect_exit 0 mr data ingest export.tar back --json
assert_eq "$(json 'd["rows_written"]')" "14" "the exported shard ingests back"

# usage and input errors
expect_exit 2 mr data ingest --files 'imgs/**/*.jpg' x --filter 'a > 1'
assert_contains "$T_ERR" "do not apply to --files" "row options are refused with --files"
expect_exit 1 mr data ingest --files 'imgs/**/*.png' x
assert_contains "$T_ERR" "no file matches" "a pattern that matches nothing"
printf 'path,label\n../secret.jpg,1\n' >bad.csv
expect_exit 2 mr data ingest --files imgs x --labels bad.csv
assert_contains "$T_ERR" "bad.csv: labels file row 1: path '../secret.jpg' is outside the base directory" \
    "a labels row outside the folder is refused with its row"

# the ingest op: packed once, cached, re-run when a file is added
mkdir pipe && cd pipe || fail "cd pipe"
cp -r ../imgs .
cat >millrace.yaml <<'EOF'
stages:
  pack:
    op: ingest
    files: imgs/**/*.jpg
    label_from: parent-dir
    rows_per_shard: 4
EOF
expect_exit 0 mr run
assert_contains "$T_ERR" "1 executed" "the op packs the files"
expect_exit 0 mr run
assert_contains "$T_ERR" "1 cached" "unchanged files: a cache hit"
printf 'new' >imgs/dog/puppy/p2.jpg
expect_exit 0 mr run
assert_contains "$T_ERR" "1 executed" "a new file three folders deep re-runs the stage"
# a run killed while the stage packs continues after the shards it finished
ln -s ../big big
printf 'stages:\n  packbig:\n    op: ingest\n    files: big/*\n    row_group_bytes: 1000000\n    codec: gzip\n    resources: {cpus: 1}\n' >millrace.yaml
"$MR_BIN" run >runner.log 2>&1 &
runner=$!
bg_track $runner
wait_for "the stage has published a few shards" 60 sh -c 'ls .millrace/partial/packbig@*/shard-00003/manifest.json'
kill -9 $runner
wait $runner 2>/dev/null
expect_exit 0 mr run
assert_contains "$(cat .millrace/logs/run-*/packbig.log)" "resumed an interrupted run" "the next run keeps the shards"
assert_eq "$(ls .millrace/partial | grep -c @)" "0" "and its work directory is gone once the stage is done"

printf 'stages:\n  pack:\n    op: ingest\n    files: imgs\n    filter: "a > 1"\n' >millrace.yaml
expect_exit 2 mr run
assert_contains "$T_ERR" "filter does not go with files" "row options are refused with files:"

# --shuffle SEED / shuffle_seed: the same files in an order the seed fixes, not the path order
expect_exit 0 mr data ingest --files imgs sh1 --shuffle 11 --label-from parent-dir
expect_exit 0 mr data ingest --files imgs sh2 --shuffle 11 --label-from parent-dir
expect_exit 0 mr data ingest --files imgs sorted --label-from parent-dir
assert_eq "$(cd sh1 && for f in *; do cmp -s "$f" "../sh2/$f" || echo "$f"; done)" "" "one seed, the same bytes"
expect_exit 0 mr data head sh1 -n 1000 --columns path
shuffled=$T_OUT
expect_exit 0 mr data head sorted -n 1000 --columns path
assert_ne "$shuffled" "$T_OUT" "not the path order"
assert_eq "$(printf '%s\n' "$shuffled" | sort)" "$(printf '%s\n' "$T_OUT" | sort)" "the same files"
expect_exit 2 mr data ingest --files imgs sh3 --shuffle -4
assert_contains "$T_ERR" "--shuffle takes a seed (an integer >= 0), got '-4'" "a negative seed is a usage error"
expect_exit 2 mr data ingest rows.csv sh3 --shuffle 4
assert_contains "$T_ERR" "go with --files" "--shuffle goes with --files"
printf 'stages:\n  pack:\n    op: ingest\n    files: imgs\n    shuffle_seed: -1\n' >millrace.yaml
expect_exit 2 mr run
assert_contains "$T_ERR" "shuffle_seed must be an integer >= 0, got -1" "the op's seed is checked at load"
printf 'stages:\n  pack:\n    op: ingest\n    files: imgs\n    shuffle_seed: 11\n    label_from: parent-dir\n' >millrace.yaml
expect_exit 0 mr run
expect_exit 0 mr data head out/pack -n 1000 --columns path
assert_eq "$T_OUT" "$shuffled" "the op's shuffle_seed gives the CLI's order"
t_done
