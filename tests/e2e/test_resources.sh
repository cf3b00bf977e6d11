#!/usr/bin/env bash
# resources: cpus and mem reach the command; stages whose declared memory
# does not fit together in physical RAM never overlap, while stages that fit
# run in parallel; `dag --json` lists stages with their upstreams.
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws res)
cd "$ws" || fail "cd"
mem_kb=$(awk '/^MemTotal:/ {print $2}' /proc/meminfo)
big=$(( mem_kb * 1024 * 6 / 10 ))   # 60% of RAM: two of them cannot run together
cat >millrace.yaml <<YAML
stages:
  env:
    op: exec
    cmd: echo "\$MILLRACE_THREADS \$MILLRACE_MEM_BYTES" > env.txt
    outs: [env.txt]
    resources: {cpus: 2, mem: 1G}
  big1:
    op: exec
    cmd: date +%s.%N > big1.t && sleep 0.6 && date +%s.%N >> big1.t
    outs: [big1.t]
    resources: {mem: $big}
  big2:
    op: exec
    cmd: date +%s.%N > big2.t && sleep 0.6 && date +%s.%N >> big2.t
    outs: [big2.t]
    resources: {mem: $big}
  small1:
    op: exec
    cmd: date +%s.%N > small1.t && sleep 0.6 && date +%s.%N >> small1.t
    outs: [small1.t]
  small2:
    op: exec
    cmd: date +%s.%N > small2.t && sleep 0.6 && date +%s.%N >> small2.t
    outs: [small2.t]
YAML
expect_exit 0 mr run -j 2 env
assert_file_content env.txt "2 1073741824" "cpus and mem reach the command as MILLRACE_THREADS and MILLRACE_MEM_BYTES"

overlap() { # A B: 1 if the [start, end] intervals in A.t and B.t overlap
    python3 - "$1" "$2" <<'PY'
import sys
a = [float(x) for x in open(sys.argv[1] + ".t").read().split()]
b = [float(x) for x in open(sys.argv[2] + ".t").read().split()]
print(1 if a[0] < b[1] and b[0] < a[1] else 0)
PY
}
expect_exit 0 mr run -j 2 big1 big2
assert_eq "$(overlap big1 big2)" 0 "two stages that each declare 60% of RAM run one after the other"
expect_exit 0 mr run -j 2 small1 small2
assert_eq "$(overlap small1 small2)" 1 "two stages without declared memory run in parallel under -j 2"

expect_exit 0 mr dag --json
assert_eq "$(json '[s["name"] for s in d["stages"]][0]')" env "dag --json lists the stages in file order"
assert_eq "$(json 'd["stages"][1]["upstream"]')" "" "independent stages have no upstream"
t_done
