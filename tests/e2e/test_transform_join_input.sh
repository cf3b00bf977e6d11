# A transform's join `with:` file is an input of the stage: its content is
# in the stage's key, so changing it makes the stage stale and the next run
# joins the new rows (it used to be served from the cache); a path outside
# the workspace is a spec error at load; a ${stages.X} `with:` stays an
# upstream (docs/transform.md, "join").
. "$(dirname "$0")/lib.sh" "$@"

ws=$(new_ws join)
cd "$ws" || fail "cd"
printf 'a,b\n1,2\n3,4\n' >x.csv
printf 'a,p\n1,10\n3,30\n' >prices.csv
cat >millrace.yaml <<'EOF'
stages:
  x: {op: ingest, source: x.csv}
  t:
    op: transform
    input: ${stages.x}
    steps:
      - join: {with: prices.csv, on: [a]}
EOF
expect_exit 0 mr run
expect_exit 0 mr data head out/t --json
assert_contains "$T_OUT" '"p":10' "the join read prices.csv"
expect_exit 0 mr status
assert_contains "$T_OUT" "everything is up to date" "unchanged: up to date"

printf 'a,p\n1,11\n3,30\n' >prices.csv
expect_exit 0 mr status
assert_match "$T_OUT" "stale +t" "a changed with: file makes the stage stale"
assert_contains "$T_OUT" "input 'prices.csv' changed" "status names the file"
assert_match "$T_OUT" "up to date +x" "the other stage stays up to date"
expect_exit 0 mr run --json
assert_eq "$(json '[s["stage"] + "=" + s["status"] for s in d["stages"]]' | tr '\n' ' ')" "x=cached t=executed " "only t re-runs"
expect_exit 0 mr data head out/t --json
assert_contains "$T_OUT" '"p":11' "the re-run joined the new rows"

sed -i 's|with: prices.csv|with: ../prices.csv|' millrace.yaml
expect_exit 2 mr dag
assert_contains "$T_ERR" "millrace.yaml:7:22: stage 't': path '../prices.csv' must be relative and stay inside the workspace" "a with: outside the workspace is refused at load, at its position"

# An upstream's output as with: an edge, not a workspace file.
cat >millrace.yaml <<'EOF'
stages:
  x: {op: ingest, source: x.csv}
  prices: {op: ingest, source: prices.csv}
  t:
    op: transform
    input: ${stages.x}
    steps:
      - join: {with: "${stages.prices}", on: [a]}
EOF
expect_exit 0 mr dag
assert_contains "$T_OUT" "t (transform) <- x, prices" "a \${stages.X} with: is an upstream"
expect_exit 0 mr run
expect_exit 0 mr data head out/t --json
assert_contains "$T_OUT" '"p":11' "joined through the upstream"
t_done
