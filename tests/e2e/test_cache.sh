# Caching on a diamond DAG (a -> b, a -> c, b + c -> d): no-op re-runs,
# param and dep changes re-run exactly the affected stages, status explains
# why, --force / --downstream / --dry / targets, and restoring a deleted
# output from the store without executing.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws diamond)
write_diamond "$ws"
cd "$ws" || fail "cd"
C="$ws/counts"
cnt() { counts "$C" a b c d; }

# First run: everything executes.
expect_exit 0 mr run
assert_contains "$T_ERR" "4 executed, 0 cached" "first run summary: 4 executed"
assert_eq "$(cnt)" "a=1 b=1 c=1 d=1" "first run executes each stage once"
assert_file_content "$ws/d.txt" "$(printf 'hello\na1\nb2\nhello\na1\nextra1\nc3')" "d.txt holds b.txt + c.txt"
assert_file "$ws/millrace.lock" "millrace.lock written"

# Second run: nothing executes.
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]') $(json 'd["cached"]') $(json 'd["status"]')" "0 4 ok" "no-op run: executed=0 cached=4"
assert_eq "$(run_statuses)" "a=cached b=cached c=cached d=cached" "no-op run: every stage cached"
assert_eq "$(cnt)" "a=1 b=1 c=1 d=1" "no-op run executes nothing"
expect_exit 0 mr status
assert_contains "$T_OUT" "everything is up to date" "status after a no-op run: up to date"

# A param override (-S): status names it, then b and d re-run, a and c do not.
expect_exit 0 mr status -S b.n=5
assert_match "$T_OUT" "stale +b" "status -S b.n=5: b stale"
assert_contains "$T_OUT" "param 'b.n' changed: 2 -> 5" "status names the changed param and values"
assert_match "$T_OUT" "stale +d" "status -S b.n=5: d stale (downstream)"
assert_match "$T_OUT" "up to date +a" "status -S b.n=5: a up to date"
assert_match "$T_OUT" "up to date +c" "status -S b.n=5: c up to date"
expect_exit 0 mr run -S b.n=5 --json
assert_eq "$(run_statuses)" "a=cached b=executed c=cached d=executed" "run -S b.n=5: statuses"
assert_eq "$(json 'd["executed"]') $(json 'd["cached"]')" "2 2" "run -S b.n=5: executed=2 cached=2"
assert_eq "$(cnt)" "a=1 b=2 c=1 d=2" "run -S b.n=5 re-runs exactly b and d"
assert_contains "$(cat "$ws/b.txt")" "b5" "b.txt reflects b.n=5"

# The same value written into millrace.yaml: the cache entry from the -S run
# is the same key, so nothing executes.
sed -i 's/b: {n: 2}/b: {n: 5}/' "$ws/millrace.yaml"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" "0" "yaml b.n=5 equals the -S run: nothing executes"
assert_eq "$(cnt)" "a=1 b=2 c=1 d=2" "counters unchanged after yaml edit to the -S value"

# A param edited in millrace.yaml: c and d re-run.
sed -i 's/c: {n: 3}/c: {n: 7}/' "$ws/millrace.yaml"
expect_exit 0 mr status --json
assert_contains "$T_OUT" "c.n" "status --json names param c.n"
expect_exit 0 mr status
assert_contains "$T_OUT" "param 'c.n' changed: 3 -> 7" "status names the yaml-edited param"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "a=cached b=cached c=executed d=executed" "yaml c.n=7: statuses"
assert_eq "$(cnt)" "a=1 b=2 c=2 d=3" "yaml c.n=7 re-runs exactly c and d"

# Editing a dep file re-runs its consumer (and d, whose input changed).
echo extra2 >"$ws/c_extra.txt"
expect_exit 0 mr status
assert_contains "$T_OUT" "input 'c_extra.txt' changed" "status names the changed dep file"
assert_match "$T_OUT" "up to date +b" "status: b not affected by c's dep"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "a=cached b=cached c=executed d=executed" "edit c_extra.txt: statuses"
assert_eq "$(cnt)" "a=1 b=2 c=3 d=4" "edit c_extra.txt re-runs c and d only"
assert_contains "$(cat "$ws/d.txt")" "extra2" "d.txt has the new dep content"

# A dep edit that does not change the consumer's output: the consumer
# re-executes, its identical output keeps d cached (keys hash content).
echo cfg2 >"$ws/b_cfg.txt"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "a=cached b=executed c=cached d=cached" "edit b_cfg.txt: b executes, d cached (same b.txt)"
assert_eq "$(cnt)" "a=1 b=3 c=3 d=4" "edit b_cfg.txt: counters"

# The shared root input: everything re-runs.
echo world >"$ws/input.txt"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" "4" "edit input.txt re-runs all 4 stages"
assert_eq "$(cnt)" "a=2 b=4 c=4 d=5" "edit input.txt: counters"

# --force b: b re-executes; its output is identical, so d stays cached.
expect_exit 0 mr run --force b --json
assert_eq "$(run_statuses)" "a=cached b=executed c=cached d=cached" "--force b: only b executes (same output -> d cached)"
assert_eq "$(cnt)" "a=2 b=5 c=4 d=5" "--force b: counters"

# --downstream b: b and d are forced.
expect_exit 0 mr run --downstream b --json
assert_eq "$(run_statuses)" "a=cached b=executed c=cached d=executed" "--downstream b: b and d execute"
assert_eq "$(cnt)" "a=2 b=6 c=4 d=6" "--downstream b: counters"

# --dry: runs nothing, records nothing, lists what would run.
expect_exit 0 mr runs --json
n_runs=$(json 'len(d["runs"])')
lock_before=$(cat "$ws/millrace.lock")
expect_exit 0 mr run --dry -S a.n=9
assert_match "$T_OUT" "would run +a" "--dry lists a (changed param)"
assert_match "$T_OUT" "would run +b" "--dry lists b (downstream of a)"
assert_match "$T_OUT" "would run +d" "--dry lists d"
assert_eq "$(cnt)" "a=2 b=6 c=4 d=6" "--dry executes nothing"
assert_eq "$(cat "$ws/millrace.lock")" "$lock_before" "--dry leaves millrace.lock alone"
expect_exit 0 mr run --dry --json
assert_eq "$(json 'd["would_run"]') $(json 'd["cached"]')" "0 4" "--dry on an up-to-date pipeline: would_run=0"
expect_exit 0 mr runs --json
assert_eq "$(json 'len(d["runs"])')" "$n_runs" "--dry records no run"

# Outputs: read-only in the workspace, hard links into the store.
for f in a b c d; do
    [ -w "$ws/$f.txt" ] && [ "$(id -u)" != 0 ] && fail "$f.txt is writable"
    mode=$(stat -c %a "$ws/$f.txt")
    case "$mode" in *[2367]*) fail "$f.txt has a write bit: $mode" ;; esac
done
pass "outputs have no write bits"
ino=$(stat -c %i "$ws/d.txt")
links=$(stat -c %h "$ws/d.txt")
[ "$links" -ge 2 ] || fail "d.txt has $links links, expected a hard link into the store"
obj=$(find "$ws/.millrace/objects" -inum "$ino" | head -1)
[ -n "$obj" ] || fail "no object in .millrace/objects shares d.txt's inode"
pass "d.txt is a hard link to $(t_short "$obj")"

# A deleted output is restored from the store without executing.
d_before=$(cat "$ws/d.txt")
rm -f "$ws/d.txt" "$ws/b.txt"
expect_exit 0 mr status
assert_match "$T_OUT" "stale +d" "status: d stale after its output was deleted"
assert_contains "$T_OUT" "outputs missing or modified" "status explains the missing output"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" "0" "deleted outputs: nothing executes"
assert_eq "$(cnt)" "a=2 b=6 c=4 d=6" "deleted outputs: counters unchanged"
assert_file_content "$ws/d.txt" "$d_before" "d.txt restored with its content"
assert_file "$ws/b.txt" "b.txt restored"
mode=$(stat -c %a "$ws/d.txt")
case "$mode" in *[2367]*) fail "restored d.txt has a write bit: $mode" ;; esac
pass "restored d.txt is read-only"

# Targets: `run b` in a fresh workspace runs only a and b.
ws2=$(new_ws targets)
write_diamond "$ws2"
cd "$ws2" || fail "cd"
expect_exit 0 mr run b --json
assert_eq "$(run_statuses)" "a=executed b=executed" "run b: only a and b selected"
assert_eq "$(counts "$ws2/counts" a b c d)" "a=1 b=1 c=0 d=0" "run b executes only a and b"
assert_no_file "$ws2/d.txt" "run b does not produce d.txt"
expect_exit 0 mr run --json
assert_eq "$(run_statuses)" "a=cached b=cached c=executed d=executed" "full run after 'run b' executes c and d"
expect_exit 2 mr run nosuch
assert_contains "$T_ERR" "nosuch" "unknown target is a usage error naming it"

t_done
