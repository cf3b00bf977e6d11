# gc keeps what millrace.lock (and kept runs) reference and drops the rest,
# with the cache entries that pointed at it; verify detects a flipped byte.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws gc)
cd "$ws" || fail "cd"
mkdir counts
cat >millrace.yaml <<'YAML'
params:
  v: v1
stages:
  gen:
    op: exec
    cmd: "echo gen >> counts/gen; echo content-${params.v} > out.txt"
    outs: [out.txt]
  fixed:
    op: exec
    cmd: "echo fixed >> counts/fixed; mkdir -p fixed.d; echo fixed-content > fixed.d/f.txt"
    outs: [fixed.d]
YAML
# objects_with TEXT: how many objects hold exactly TEXT (one line).
objects_with() {
    local n=0 f
    while IFS= read -r f; do
        [ "$(cat "$f")" = "$1" ] && n=$((n + 1))
    done < <(find .millrace/objects -type f)
    echo $n
}

expect_exit 0 mr run
expect_exit 0 mr run -S v=v2
assert_eq "$(cat out.txt)" "content-v2" "the v2 run published content-v2"
assert_eq "$(objects_with content-v1) $(objects_with content-v2) $(objects_with fixed-content)" "1 1 1" "store holds v1, v2 and the fixed output"
assert_eq "$(count counts/gen) $(count counts/fixed)" "2 1" "gen ran twice, fixed once"

# Default gc keeps every run's artifacts; --dry deletes nothing.
expect_exit 0 mr gc --json
assert_eq "$(json 'd["deleted"]')" "0" "gc (keep all runs) deletes nothing"
expect_exit 0 mr gc --keep-runs 0 --dry --json
assert_eq "$(json 'd["deleted"]') $(json 'd["dry_run"]')" "1 true" "gc --dry --keep-runs 0 would delete one object"
assert_eq "$(objects_with content-v1)" "1" "gc --dry deleted nothing"
# Keeping the newest run keeps v2 only (the v1 run is older).
expect_exit 0 mr gc --keep-runs 1 --dry --json
assert_eq "$(json 'd["deleted"]')" "1" "gc --keep-runs 1 --dry: only v1's artifact is unreferenced"

expect_exit 0 mr gc --keep-runs 0 --json
assert_eq "$(json 'd["deleted"]')" "1" "gc --keep-runs 0 deletes one object"
assert_eq "$(objects_with content-v1)" "0" "v1's artifact is gone"
assert_eq "$(objects_with content-v2) $(objects_with fixed-content)" "1 1" "v2's artifact and the fixed output (in the lock) are kept"
[ "$(json 'd["cache_entries_dropped"]')" -ge 1 ] || fail "gc dropped no cache entry for the deleted artifact"
pass "gc dropped the cache entry of the deleted artifact"
expect_exit 0 mr verify
assert_contains "$T_OUT" "0 problems" "verify passes after gc"
expect_exit 0 mr gc --keep-runs 0 --json
assert_eq "$(json 'd["deleted"]')" "0" "a second gc deletes nothing"

# v2 is still served from the cache; v1 is recomputed (its entry is gone).
expect_exit 0 mr run -S v=v2 --json
assert_eq "$(run_statuses)" "gen=cached fixed=cached" "v2 after gc: cached"
expect_exit 0 mr status
assert_match "$T_OUT" "stale +gen" "status after gc: gen stale for v1"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "gen=executed fixed=cached" "v1 after gc: gen recomputed"
assert_eq "$(cat out.txt)" "content-v1" "v1 recomputed output"
assert_eq "$(count counts/gen)" "3" "gen's command ran a third time"
expect_exit 0 mr verify --json
assert_eq "$(json 'd["ok"]')" "true" "verify --json ok after the recompute"

# verify detects a flipped byte in an artifact.
obj=$(grep -rlx content-v1 .millrace/objects | head -1)
[ -n "$obj" ] || fail "cannot find v1's object"
rel=${obj#.millrace/objects/}
id=${rel%%/*}${rel#*/}
chmod u+w "$obj"
python3 - "$obj" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
b[3] ^= 0x01
open(p, "r+b").write(bytes(b))
PY
expect_exit 1 mr verify
assert_contains "$T_OUT" "$id" "verify names the corrupt artifact ($id)"
assert_match "$T_OUT" "$id: .*(corrupt|hash|mismatch)" "verify says the artifact is corrupt"
assert_contains "$T_OUT" "1 problem" "verify counts one problem"
expect_exit 1 mr verify --json
assert_eq "$(json 'd["ok"]')" "false" "verify --json: ok=false"
assert_eq "$(json '[p["artifact"] for p in d["problems"]]')" "$id" "verify --json names only the flipped artifact"

t_done
