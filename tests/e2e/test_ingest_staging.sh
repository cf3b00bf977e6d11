#!/usr/bin/env bash
# `millrace data ingest` killed mid-way leaves DIR.tmp.PID (and, between its
# two renames, DIR.old.PID) behind (issue 18, finding 9). The next successful
# ingest into DIR removes those of processes that no longer run, and never
# those of a live ingest; a failed ingest removes nothing (a DIR.old.PID may
# be the only copy of the old dataset).
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws staging)
cd "$ws" || fail "cd"
printf 'a,b\n1,x\n2,y\n' >good.csv
printf 'a,b\n1,x\n2\n' >bad.csv

# a real ingest, killed while it reads its source (a FIFO this shell keeps open)
mkfifo slow.csv
"$MR_BIN" data ingest slow.csv ds >slow.log 2>&1 &
killed=$!
bg_track $killed
exec 3>slow.csv
printf 'a,b\n1,x\n' >&3
wait_for "the ingest has its staging directory" 10 test -d "ds.tmp.$killed"
kill -9 "$killed"
wait "$killed" 2>/dev/null
exec 3>&-
assert_file "ds.tmp.$killed" "a killed ingest leaves ds.tmp.PID behind"

# a dead ingest caught between its renames, and the staging of a live one
sh -c 'exit 0' &
dead=$!
wait "$dead"
mkdir -p "ds.old.$dead" && echo old >"ds.old.$dead/manifest.json"
sleep 60 &
live=$!
bg_track $live
mkdir -p "ds.tmp.$live" "ds.tmpx.$dead" "other.tmp.$dead"

expect_exit 1 mr data ingest bad.csv ds
assert_file "ds.tmp.$killed" "a failed ingest removes no staging directory"
assert_file "ds.old.$dead" "a failed ingest keeps a dead ingest's ds.old.PID (maybe the only copy)"

expect_exit 0 mr data ingest good.csv ds
assert_contains "$T_ERR" "removed ds.tmp.$killed, left by ingest process $killed, which no longer runs" \
    "the successful ingest says what it removed"
assert_no_file "ds.tmp.$killed" "the killed ingest's ds.tmp.PID is removed"
assert_no_file "ds.old.$dead" "a dead ingest's ds.old.PID is removed"
assert_file "ds.tmp.$live" "a live process's ds.tmp.PID is kept"
assert_file "ds.tmpx.$dead" "a name that is not DIR.tmp.PID is kept"
assert_file "other.tmp.$dead" "another dataset's staging is kept"
expect_exit 0 mr data head ds --json
assert_eq "$T_OUT" $'{"a":1,"b":"x"}\n{"a":2,"b":"y"}' "the new dataset is in place"
# the same through a path with a directory part and a trailing slash
mkdir -p sub && mkdir -p "sub/d2.tmp.$dead"
expect_exit 0 mr data ingest good.csv sub/d2/
assert_no_file "sub/d2.tmp.$dead" "staging next to DIR is found through DIR's parent"
t_done
