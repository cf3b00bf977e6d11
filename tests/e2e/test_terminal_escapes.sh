#!/usr/bin/env bash
# Text from data never reaches the terminal raw (issue 18, finding 8): a CSV
# and a bundle whose names and values hold ESC sequences (set the title,
# clear the screen), BEL, DEL, a C1 CSI (U+009B), a bidi override (U+202E)
# and bytes that are not UTF-8 go through data head/inspect/stats, model
# inspect, bundle inspect, runs/show/compare and error messages; every
# output's bytes are checked: no control character but the newline, no C1
# or bidi control, valid UTF-8; every --json output parses, with the values
# as they were (finding 9: values that are not UTF-8 become U+FFFD).
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws esc)
cd "$ws" || fail "cd"
python3 - <<'PY'
import random
rows = [b'id,"na\x1b]0;PWNED\x07me",v\n',
        b'1,"\x1b[2J\x1b[H",x\xc2\x9by\n',
        b'2,"bi\xe2\x80\xaedi del\x7f",\xff\xferaw\n',
        b'3,"multi\nline",ok\n']
open("e.csv", "wb").write(b"".join(rows))
r = random.Random(2)
with open("t.csv", "wb") as f:
    f.write(b'"f\x1b[2Jone",f2,label\n')
    for i in range(300):
        a, b = r.random(), r.random()
        f.write(f"{a:.3f},{b:.3f},{int(a > b)}\n".encode())
open("bad_header.csv", "wb").write(b"a,b\xe9c,d\n1,2,3\n")
PY

# safe FILE WHAT: FILE's bytes hold nothing a terminal acts on
safe() {
    python3 - "$1" <<'PY' || fail "$2: unsafe bytes in the output (see above)"
import re, sys
data = open(sys.argv[1], "rb").read()
bad = [i for i, c in enumerate(data) if (c < 0x20 and c != 0x0a) or c == 0x7f]
if bad:
    sys.exit(f"control byte 0x{data[bad[0]]:02x} at offset {bad[0]}: {data[max(0, bad[0] - 20):bad[0] + 20]!r}")
try:
    text = data.decode("utf-8")
except UnicodeDecodeError as e:
    sys.exit(f"not UTF-8: {e}")
m = re.search("[\u0080-\u009f\u202a-\u202e\u2066-\u2069\u2028\u2029]", text)
if m:
    sys.exit(f"C1 or bidi control U+{ord(m.group()):04X} at {m.start()}")
PY
    pass "$2"
}

# out CMD...: runs CMD with stdout and stderr into files (the raw bytes)
out() {
    T_LAST="$*"
    "$@" >o.bin 2>e.bin
    T_RC=$?
}

out mr data head e.csv
assert_eq "$T_RC" 0 "data head of the CSV exits 0"
safe o.bin "data head: the table is safe"
assert_contains "$(cat o.bin)" 'na\x1b]0;PWNED\x07me' "data head shows the ESC in a name visibly"
assert_contains "$(cat o.bin)" '\x1b[2J\x1b[H' "data head shows a clear-screen value visibly"
assert_contains "$(cat o.bin)" 'x\u009by' "a C1 control is shown as \\u009b"
assert_contains "$(cat o.bin)" 'bi\u202edi del\x7f' "a bidi override and DEL are shown"
assert_contains "$(cat o.bin)" '\xff\xferaw' "bytes that are not UTF-8 are shown as \\xHH"
assert_contains "$(cat o.bin)" 'multi\nline' "a newline inside a value stays on its row"
out mr data head e.csv --json
safe o.bin "data head --json is safe"
python3 - <<'PY' || fail "data head --json: not valid JSON, or the values changed"
import json
rows = [json.loads(l) for l in open("o.bin", encoding="utf-8")]
name = "na\x1b]0;PWNED\x07me"
assert [r[name] for r in rows] == ["\x1b[2J\x1b[H", "bi\u202edi del\x7f", "multi\nline"], rows
assert rows[0]["v"] == "x\u009by" and rows[1]["v"] == "\ufffd\ufffdraw", rows
PY
pass "data head --json is valid JSON with the values as they were (not UTF-8: U+FFFD)"

expect_exit 0 mr data ingest e.csv ds
for args in "inspect ds" "inspect ds --json" "stats ds" "stats ds --json" "head ds" "stats e.csv"; do
    # shellcheck disable=SC2086
    out mr data $args
    assert_eq "$T_RC" 0 "data $args exits 0"
    safe o.bin "data $args is safe"
done
out mr data inspect ds --json
python3 -c 'import json; d = json.load(open("o.bin")); assert d["columns"][1]["name"] == "na\x1b]0;PWNED\x07me"; assert d["columns"][1]["min"] == "\x1b[2J\x1b[H"' ||
    fail "data inspect --json: names and bounds as they were"
pass "data inspect --json keeps the name and the bound"

# errors quoting input
out mr data head e.csv --filter $'"nosuch\e[2J" == 1'
assert_eq "$T_RC" 2 "a filter naming an unknown column fails"
safe e.bin "the error quoting the filter is safe"
assert_contains "$(cat e.bin)" 'nosuch\x1b[2J' "the error shows the name visibly"
out mr data head bad_header.csv
assert_eq "$T_RC" 2 "a header that is not UTF-8 is refused"
assert_eq "$(cat e.bin | head -n 1)" \
    "millrace: error: bad_header.csv:1:2: the name in field 2 of the header is not valid UTF-8" \
    "the error names file, line and field (not 'out of memory')"

# a model and a bundle with such names
expect_exit 0 mr train t.csv --label label -p objective=binary -p num_iterations=5 -o m.bin
out mr model inspect m.bin
safe o.bin "model inspect is safe"
assert_contains "$(cat o.bin)" 'f\x1b[2Jone' "model inspect shows the feature name visibly"
out mr model inspect m.bin --json
safe o.bin "model inspect --json is safe"
# a hostile bundle: the package op refuses control characters in a name,
# the format does not (written through the library by tests/tools)
"$(dirname "$MR_BIN")/tests/mr_bundletool" m.bin evil.mrb $'evil\e]0;PWNED\a\e[2J\u202e' $'st\e[5m' \
    '{"auc\u001b[2J": 0.5}' || fail "mr_bundletool"
out mr bundle inspect evil.mrb
assert_eq "$T_RC" 0 "bundle inspect exits 0"
safe o.bin "bundle inspect is safe"
assert_contains "$(cat o.bin)" 'name: evil\x1b]0;PWNED\x07\x1b[2J\u202e' "bundle inspect shows the escapes in the name"
assert_contains "$(cat o.bin)" 'f\x1b[2Jone' "bundle inspect shows the input name visibly"
assert_contains "$(cat o.bin)" 'stage st\x1b[5m' "bundle inspect shows the lineage visibly"
out mr bundle inspect evil.mrb --json
safe o.bin "bundle inspect --json is safe"
python3 -c 'import json; d = json.load(open("o.bin")); assert d["name"] == "evil\x1b]0;PWNED\x07\x1b[2J\u202e", d["name"]' ||
    fail "bundle inspect --json: the name as it was"
pass "bundle inspect --json keeps the name"
printf 'stages:\n  pkg:\n    op: package\n    model: m.bin\n    name: plain\n' >millrace.yaml
run_cmd mr run --name $'n\e[2Jx' --tag $'k=v\e[1m\x9b'
assert_eq "$T_RC" 0 "a run named and tagged with escapes"

# the run store: names, tags, command lines
expect_exit 0 mr run --force-all --name plain
for args in "runs" "runs --json" "show 1" "show 1 --json" "compare 1 2" "compare 1 2 --json"; do
    # shellcheck disable=SC2086
    out mr $args
    assert_eq "$T_RC" 0 "$args exits 0"
    safe o.bin "$args is safe"
done
out mr runs
assert_contains "$(cat o.bin)" 'n\x1b[2Jx' "runs shows the run name visibly"
assert_contains "$(cat o.bin)" 'k=v\x1b[1m\x9b' "runs shows the tag visibly"
out mr run --tag $'k\e]0;T\a=v'
assert_eq "$T_RC" 2 "a bad tag is a usage error"
safe e.bin "the usage error quoting the tag is safe"
t_done
