# Outputs are stored by content, as regular files; nothing millrace does
# changes a file outside the workspace and .millrace/ (issue 18, finding 4).
. "$(dirname "$0")/lib.sh" "$@"

outside=$(new_ws outside)
printf 'outside content\n' >"$outside/file.txt"
mkdir -p "$outside/dir"
printf 'one\n' >"$outside/dir/a.txt"
chmod 0644 "$outside/file.txt" "$outside/dir/a.txt"
mode() { stat -c %a "$1"; }

ws=$(new_ws symlinks)
cd "$ws" || fail "cd"
cat >millrace.yaml <<YAML
stages:
  link:
    op: exec
    cmd: "ln -s $outside/file.txt link.txt && mkdir -p tree && ln -s $outside/file.txt tree/inner.txt && echo own > tree/own.txt"
    outs: [link.txt, tree]
  use:
    op: exec
    cmd: "cat link.txt tree/inner.txt > use.txt"
    deps: [link.txt, tree]
    outs: [use.txt]
YAML
expect_exit 0 mr run
assert_eq "$(mode "$outside/file.txt")" 644 "the outside file's mode is unchanged (never made read-only)"
assert_eq "$(cat "$outside/file.txt")" "outside content" "the outside file is unchanged"
[ -L link.txt ] && fail "link.txt is still a symlink"
[ -L tree/inner.txt ] && fail "tree/inner.txt is still a symlink"
pass "a symlinked output (and one inside an output directory) is replaced by a copy of its content"
assert_eq "$(cat link.txt)" "outside content" "the copy holds the content"
n_links=$(find .millrace/objects -type l | wc -l)
assert_eq "$n_links" 0 "the store holds no symbolic link"
# The outside file changes: the store and the workspace do not.
chmod u+w "$outside/file.txt"
printf 'changed outside\n' >"$outside/file.txt"
expect_exit 0 mr verify
assert_eq "$(cat link.txt)" "outside content" "the stored copy does not follow the outside file"
expect_exit 0 mr run --json
assert_eq "$(json 'd["executed"]')" 0 "nothing changed inside the workspace: all from the cache"

# A symlink to a directory cannot be an output: refused, outside untouched.
ws2=$(new_ws dirlink)
cd "$ws2" || fail "cd"
cat >millrace.yaml <<YAML
stages:
  dl:
    op: exec
    cmd: "ln -s $outside/dir dirlink"
    outs: [dirlink]
YAML
expect_exit 1 mr run
assert_contains "$T_ERR" "symbolic link to a directory" "a directory symlink output is refused, saying why"
assert_eq "$(mode "$outside/dir/a.txt")" 644 "files under the outside directory keep their mode"
assert_eq "$(find .millrace/objects -type f | wc -l)" 0 "nothing from outside reached the store"
t_done
