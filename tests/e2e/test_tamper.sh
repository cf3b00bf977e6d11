#!/usr/bin/env bash
# An output edited in place (chmod u+w, then written) writes through its hard
# link into the store. The next run must notice, recompute the stage rather
# than link the corrupt object back, and leave the store verifiable.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws tamper)
mkdir -p "$ws/counts"
cat >"$ws/millrace.yaml" <<'YAML'
stages:
  a:
    op: exec
    cmd: echo good > out.txt && echo x >> counts/a
    outs: [out.txt]
YAML
cd "$ws" || fail "cd"
expect_exit 0 mr run
assert_eq "$(count counts/a)" 1 "first run executes a"
chmod u+w out.txt && echo BAD >out.txt
expect_exit 1 mr verify
assert_contains "$T_OUT" "corrupt" "verify sees the object corrupted through the hard link"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 1 "the tampered stage is recomputed, not restored from the corrupt object"
assert_eq "$(count counts/a)" 2 "its command ran again"
assert_file_content out.txt good "the workspace holds the good output again"
assert_contains "$(cat .millrace/logs/run-2/a.log)" "unusable" "the stage log says why it recomputed"
expect_exit 0 mr verify
expect_exit 0 mr run --json
assert_eq "$(json 'd["cached"]')" 1 "and the next run is a cache hit"
t_done
