#!/usr/bin/env bash
# Remotes (docs/remote.md): `millrace remote add|list|remove` edit
# millrace.yaml's remotes: section; `push` uploads what millrace.lock
# references, `pull` brings it back verified. Two workspaces (two clones):
# the first runs and pushes; the second pulls, runs and executes nothing,
# its artifacts byte-identical; a stage changed there computes only itself
# and its dependents. A second push uploads nothing. A corrupted object on
# the remote is refused on pull, named. Pushes killed with kill -9 at random
# points leave the remote consistent (no stage entry without all its
# objects, no manifest without its files), and the next push completes it.
# The same against S3 (scripts/start-s3.sh), the layout checked with awscli.
. "$(dirname "$0")/lib.sh" "$@"
SRC=$(cd "$(dirname "$0")/../.." && pwd)
one=$(new_ws remote1)
share="$T_ROOT/share"
cd "$one" || fail "cd"
awk 'BEGIN { srand(2); print "user,clicks,views"; for (i = 0; i < 3000; i++) printf "u%d,%d,%d\n", i % 97, int(rand() * 20), 1 + int(rand() * 40) }' >clicks.csv
cat >millrace.yaml <<'EOF'
# a small pipeline: a transform, a split, and an exec stage writing a directory of files
stages:
  clean:
    op: transform
    input: clicks.csv
    steps:
      - filter: "clicks > 3"
  parts:
    op: split
    input: ${stages.clean}
    parts: {train: 0.7, test: 0.3}
  shards:
    op: exec
    cmd: mkdir -p shards && for i in $(seq 1 150); do echo "shard $i $(wc -l < clicks.csv)" > shards/s$i.txt; done
    deps: [clicks.csv]
    outs: [shards]
EOF
expect_exit 0 mr run
expect_exit 0 mr remote add share "file://$share" --default
assert_contains "$(cat millrace.yaml)" "remotes:" "remote add writes a remotes: section"
assert_contains "$(head -1 millrace.yaml)" "# a small pipeline" "and keeps the rest of the file as it was"
expect_exit 0 mr remote list --json
assert_eq "$(json 'd["remotes"][0]["name"] + " " + d["remotes"][0]["url"] + " " + str(d["remotes"][0]["default"])')" \
    "share file://$share True" "remote list shows it, the default"
expect_exit 0 mr push
assert_match "$T_OUT" "push to share .*: [0-9]+ objects .* uploaded, 0 already there; 3 stage results" "the first push uploads everything"
n_objects=$(ls "$share/objects" | wc -l)
assert_eq "$(( n_objects > 150 ))" 1 "every file of every output is an object on the remote ($n_objects)"
expect_exit 0 mr push
assert_contains "$T_OUT" "0 objects (0 bytes) uploaded, $n_objects already there" "a second push uploads nothing"
assert_contains "$T_OUT" "3 stage results (0 written)" "and rewrites no stage entry"
# on a terminal, a live progress line: bytes, rate, objects (script(1) gives the push a tty)
ptty="$T_ROOT/tty-share"
mr remote add tty "file://$ptty" >/dev/null || fail "remote add tty"
script -qc "$MR_BIN push --remote tty" /dev/null >tty.out 2>&1 || fail "push on a tty failed: $(cat tty.out)"
assert_match "$(tr '\r' '\n' <tty.out)" "push \[=+\] +100% .*B/s.* ([0-9]+) of \1 objects" "a push on a terminal shows its progress"
mr remote remove tty >/dev/null || fail "remote remove tty"

# the second clone: pull, then run executes nothing; the same bytes
two=$(new_ws remote2)
cp millrace.yaml millrace.lock clicks.csv "$two/"
cd "$two" || fail "cd"
expect_exit 0 mr pull
assert_contains "$T_OUT" "3 stage results" "pull takes every stage's result"
expect_exit 0 mr run
assert_contains "$T_ERR" "0 executed, 3 cached" "after a pull, the run executes nothing"
assert_eq "$(cd "$one" && find out shards -type f | sort | xargs md5sum)" "$(find out shards -type f | sort | xargs md5sum)" \
    "the pulled outputs are byte-identical"
expect_exit 0 mr verify
# a changed stage: only it and its dependents run
sed -i 's/clicks > 3/clicks > 5/' millrace.yaml
expect_exit 0 mr run
assert_contains "$T_ERR" "2 executed, 1 cached" "a stage changed after a pull computes only itself and its dependent"

# the remote as a cache inside runs: a clone without even a lock runs with --remote and executes nothing
six=$(new_ws remote6)
cp "$one/millrace.yaml" "$one/clicks.csv" "$six/"
cd "$six" || fail "cd"
expect_exit 0 mr status --remote share
assert_contains "$T_OUT" "3 of 3 stale stages the remote 'share' can serve" "status --remote: the remote can serve every stale stage"
assert_contains "$T_OUT" "remote      parts" "a stage after another the remote serves gets its key from the remote's outputs"
sed 's/clicks > 3/clicks > 4/' millrace.yaml >changed.yaml
cp millrace.yaml kept.yaml && cp changed.yaml millrace.yaml
expect_exit 0 mr status --remote share --json
assert_eq "$(json 'd["remote"], [s["state"] for s in d["stages"]]')" "(1, ['stale', 'stale', 'remote'])" \
    "a changed stage is not on the remote, nor what depends on it; the rest is"
cp kept.yaml millrace.yaml
expect_exit 0 mr run --remote share
assert_contains "$T_ERR" "0 executed, 3 cached" "run --remote: every stage's result comes from the remote"
assert_contains "$(cat .millrace/logs/run-1/clean.log)" "its result came from the remote file://$share" "the stage log says so"
assert_eq "$(cd "$one" && find out shards -type f | sort | xargs md5sum)" "$(find out shards -type f | sort | xargs md5sum)" \
    "byte-identical to the clone that computed them"
# a stage computed in a run with --remote is pushed: the next clone gets it
sed -i 's/clicks > 3/clicks > 2/' millrace.yaml
expect_exit 0 mr run --remote share
assert_contains "$T_ERR" "2 executed, 1 cached" "a changed stage computes, with its dependent"
seven=$(new_ws remote7)
cp millrace.yaml clicks.csv "$seven/"
cd "$seven" || fail "cd"
expect_exit 0 mr run --remote share
assert_contains "$T_ERR" "0 executed, 3 cached" "what a run with --remote computed, the next one downloads"
# cache: on a remote makes every run use it; --no-remote does not
eight=$(new_ws remote8)
cp millrace.yaml clicks.csv "$eight/"
cd "$eight" || fail "cd"
sed -i 's|^    default: true$|    default: true\n    cache: pull|' millrace.yaml
expect_exit 0 mr run --no-remote
assert_contains "$T_ERR" "3 executed" "--no-remote computes"
rm -rf .millrace out shards millrace.lock
expect_exit 0 mr run
assert_contains "$T_ERR" "0 executed, 3 cached" "cache: pull makes a plain run use the remote"
cd "$one" || fail "cd"

# a corrupted object on the remote: refused on pull, named; nothing of it enters the store
victim=$(ls "$share/objects" | grep -v '\.dir$' | head -1)
chmod u+w "$share/objects/$victim" 2>/dev/null
printf 'garbage' >>"$share/objects/$victim"
three=$(new_ws remote3)
cp "$one/millrace.yaml" "$one/millrace.lock" "$one/clicks.csv" "$three/"
cd "$three" || fail "cd"
expect_exit 1 mr pull
assert_contains "$T_ERR" "object $victim" "the corrupt object is named"
assert_contains "$T_ERR" "hashes to" "and why it is refused"
assert_eq "$(find .millrace/objects -type f -name "${victim:2}" | wc -l)" 0 "it never enters the local store"
run_cmd mr verify
assert_not_contains "$T_OUT" "corrupt" "the local store holds nothing corrupt (only the results not pulled are missing)"
# repaired by a push from a good store
cd "$one" || fail "cd"
rm -f "$share/objects/$victim"
expect_exit 0 mr push
assert_contains "$T_OUT" "1 objects" "a push puts the missing object back"
cd "$three" || fail "cd"
expect_exit 0 mr pull
expect_exit 0 mr run
assert_contains "$T_ERR" "0 executed, 3 cached" "and the pull then gives every result"

# pushes killed at random points: the remote stays consistent, the next push completes it
consistent() { # DIR: every stage entry's outputs and every manifest's files are there
    /usr/bin/python3 - "$1" <<'PYEOF'
import json, os, sys
root = sys.argv[1]
objs = set(os.listdir(os.path.join(root, "objects"))) if os.path.isdir(os.path.join(root, "objects")) else set()
bad = []
for o in objs:
    if o.endswith(".dir"):
        for line in open(os.path.join(root, "objects", o)):
            h = line.split(" ", 1)[0]
            if h not in objs: bad.append("manifest %s lists missing %s" % (o, h))
sd = os.path.join(root, "stages")
for e in (os.listdir(sd) if os.path.isdir(sd) else []):
    if not e.endswith(".json"): continue
    for name, oid in json.load(open(os.path.join(sd, e)))["outputs"].items():
        if oid not in objs: bad.append("stage entry %s names missing %s" % (e, oid))
print("\n".join(bad) if bad else "consistent")
PYEOF
}
cd "$one" || fail "cd"
cp millrace.yaml old.yaml && cp millrace.lock old.lock
sed -i 's/seq 1 150/seq 1 400/' millrace.yaml
expect_exit 0 mr run
kshare="$T_ROOT/kshare"
mr remote add kill "file://$kshare" >/dev/null || fail "remote add kill"
# kill_pushes REMOTE MAX_MS CHECK...: 20 pushes to REMOTE killed with kill -9 after a random
# wait below MAX_MS milliseconds (under 1,000), CHECK printing "consistent" after each
kill_pushes() {
    local remote=$1 max_ms=$2 trial pid verdict
    shift 2
    for trial in $(seq 1 20); do
        "$MR_BIN" push --remote "$remote" -j 1 >/dev/null 2>&1 &
        pid=$!
        sleep "$(printf '0.%03d' $(( RANDOM % max_ms )))"
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        verdict=$("$@")
        [ "$verdict" = consistent ] || fail "trial $trial: remote $remote is inconsistent after kill -9: $verdict"
    done
}
kill_pushes kill 100 consistent "$kshare"
pass "20 pushes killed with kill -9 at random points left the remote consistent"
expect_exit 0 mr push --remote kill
assert_eq "$(consistent "$kshare")" consistent "the next push completes it"
four=$(new_ws remote4)
cp millrace.yaml millrace.lock clicks.csv "$four/"
cd "$four" || fail "cd"
expect_exit 0 mr pull --remote kill
expect_exit 0 mr run
assert_contains "$T_ERR" "0 executed, 3 cached" "a pull from the completed remote gives every result"
assert_eq "$(ls shards | wc -l)" 400 "the directory output whole"

# gc --remote: what neither the lock nor a kept run references goes (entries first); what is kept still pulls
cd "$one" || fail "cd"
expect_exit 0 mr push
before=$(ls "$share/objects" | wc -l)
expect_exit 0 mr gc --remote share --keep-runs 0 --dry
assert_match "$T_OUT" "would delete [1-9][0-9]* objects and 3 stage results, kept [0-9]+ objects \(dry run\)" \
    "gc --remote --dry says what would go: the old shards' and the other clone's results"
assert_eq "$(ls "$share/objects" | wc -l)" "$before" "a dry run deletes nothing"
expect_exit 0 mr gc --remote share --keep-runs 0 --json
assert_eq "$(json 'd["deleted_stage_results"], d["deleted_objects"] > 0, d["dry_run"]')" "(3, True, False)" "gc --remote deletes them"
assert_eq "$(consistent "$share")" consistent "and leaves the remote consistent"
eleven=$(new_ws remote11)
cp millrace.yaml millrace.lock clicks.csv "$eleven/"
cd "$eleven" || fail "cd"
expect_exit 0 mr pull --remote share
expect_exit 0 mr run
assert_contains "$T_ERR" "0 executed, 3 cached" "the kept results still pull whole"
twelve=$(new_ws remote12)
cp "$one/old.yaml" "$twelve/millrace.yaml"
cp "$one/old.lock" "$twelve/millrace.lock"
cp clicks.csv "$twelve/"
cd "$twelve" || fail "cd"
expect_exit 1 mr pull --remote share
assert_contains "$T_OUT" "2 stage results, 1 not on the remote" "the result gc removed is gone; the shared ones stay"

# mistakes
cd "$one" || fail "cd"
expect_exit 2 mr remote add bad "s3://No_Such/x"
assert_contains "$T_ERR" "expected s3://BUCKET[/PREFIX] or file:///PATH" "a bad url is refused"
expect_exit 2 mr remote add share "file:///elsewhere"
assert_contains "$T_ERR" "remote 'share' exists already" "a taken name is refused"
expect_exit 2 mr remote remove nosuch
assert_contains "$T_ERR" "no remote 'nosuch'" "removing an unknown remote names it"
expect_exit 2 mr push --remote shre
assert_contains "$T_ERR" "did you mean 'share'?" "an unknown remote gets a did-you-mean"
expect_exit 2 mr push nosuchstage
assert_contains "$T_ERR" "stage 'nosuchstage' has no result in millrace.lock" "an unknown stage is named"
cp millrace.yaml good.yaml
printf '  other:\n    url: "file:///x"\n    defualt: true\n' >>millrace.yaml
expect_exit 2 mr status
assert_contains "$T_ERR" "unknown key 'defualt'" "a mistake in remotes: is reported"
assert_contains "$T_ERR" "did you mean 'default'?" "with a did-you-mean"
cp good.yaml millrace.yaml
expect_exit 0 mr remote remove kill
expect_exit 0 mr remote remove share
assert_not_contains "$(cat millrace.yaml)" "remotes:" "removing the last remote removes the section"
assert_eq "$(diff <(head -16 millrace.yaml) <(head -16 good.yaml) >/dev/null && echo same)" same "and leaves the stages as they were"

# the same against S3, the layout checked by awscli
s3_start
expect_exit 0 mr remote add s3 "s3://$MILLRACE_S3_BUCKET/team/cache" --endpoint "$MILLRACE_S3_ENDPOINT" --default
expect_exit 0 mr push
assert_contains "$T_OUT" "3 stage results" "a push to S3"
keys=$(/usr/bin/aws --endpoint-url "$MILLRACE_S3_ENDPOINT" --region us-east-1 s3 ls --recursive "s3://$MILLRACE_S3_BUCKET/team/cache/" | awk '{ print $4 }')
assert_eq "$(printf '%s\n' "$keys" | grep -c '^team/cache/stages/[0-9a-f]\{32\}\.json$')" 3 "one entry per stage under stages/"
assert_eq "$(printf '%s\n' "$keys" | grep -c '^team/cache/objects/[0-9a-f]\{32\}\(\.dir\)\?$')" "$(ls "$kshare/objects" | grep -c '^[0-9a-f]\{32\}\(\.dir\)\?$')" \
    "every object under objects/, as on the shared directory"
assert_eq "$(ls "$kshare/objects" | grep -vc '^[0-9a-f]\{32\}\(\.dir\)\?$')" 0 "killed pushes left no half-written file among the objects"
expect_exit 0 mr push
assert_contains "$T_OUT" "0 objects (0 bytes) uploaded" "a second push to S3 uploads nothing"
assert_contains "$T_OUT" "3 stage results (0 written)" "and writes no stage entry"
: >"$sdir/requests.log"
expect_exit 0 mr push
assert_eq "$(grep -c '"method":"PUT"' "$sdir/requests.log")" 0 "the server sees no PUT for a push with nothing new"
five=$(new_ws remote5)
cp millrace.yaml millrace.lock clicks.csv "$five/"
cd "$five" || fail "cd"
expect_exit 0 mr pull
expect_exit 0 mr run
assert_contains "$T_ERR" "0 executed, 3 cached" "a clone pulling from S3 executes nothing"
assert_eq "$(cd "$one" && find out shards -type f | sort | xargs md5sum)" "$(find out shards -type f | sort | xargs md5sum)" \
    "the outputs pulled from S3 are byte-identical"
# pushes to S3 killed at random points: the bucket stays consistent (boto3 checks), a
# clone's run --remote never uses a partial output, and the next push completes it
consistent_s3() { # PREFIX
    /usr/bin/python3 - "$1" <<'PYEOF'
import boto3, json, os, sys
pre = sys.argv[1]
c = boto3.client("s3", endpoint_url=os.environ["MILLRACE_S3_ENDPOINT"], region_name="us-east-1")
b = os.environ["MILLRACE_S3_BUCKET"]
keys = []
for page in c.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix=pre + "/"):
    keys += [o["Key"] for o in page.get("Contents", [])]
objs = {k[len(pre) + 9:] for k in keys if k.startswith(pre + "/objects/")}
bad = []
for o in objs:
    if o.endswith(".dir"):
        for line in c.get_object(Bucket=b, Key=pre + "/objects/" + o)["Body"].read().decode().splitlines():
            if line.split(" ", 1)[0] not in objs: bad.append("manifest %s lists a missing object" % o)
for k in keys:
    if k.startswith(pre + "/stages/") and k.endswith(".json"):
        for name, oid in json.loads(c.get_object(Bucket=b, Key=k)["Body"].read())["outputs"].items():
            if oid not in objs: bad.append("stage entry %s names missing %s" % (k, oid))
print("\n".join(bad) if bad else "consistent")
PYEOF
}
cd "$one" || fail "cd"
mr remote add s3kill "s3://$MILLRACE_S3_BUCKET/kill" --endpoint "$MILLRACE_S3_ENDPOINT" >/dev/null || fail "remote add s3kill"
kill_pushes s3kill 400 consistent_s3 kill
pass "20 pushes to S3 killed with kill -9 at random points left the bucket consistent"
thirteen=$(new_ws remote13)
cp millrace.yaml clicks.csv "$thirteen/"
(cd "$thirteen" && "$MR_BIN" run --remote s3kill >/dev/null 2>&1) || fail "a run --remote against the partly pushed bucket failed"
assert_eq "$(cd "$one" && find out shards -type f | sort | xargs md5sum)" "$(cd "$thirteen" && find out shards -type f | sort | xargs md5sum)" \
    "a run --remote against the partly pushed bucket gives the right outputs (hits whole, the rest computed)"
expect_exit 0 mr push --remote s3kill
assert_eq "$(consistent_s3 kill)" consistent "the next push to S3 completes it"
fourteen=$(new_ws remote14)
cp millrace.yaml clicks.csv "$fourteen/"
cd "$fourteen" || fail "cd"
expect_exit 0 mr run --remote s3kill
assert_contains "$T_ERR" "0 executed, 3 cached" "and then serves every stage"
nine=$(new_ws remote9)
cp millrace.yaml clicks.csv "$nine/"
cd "$nine" || fail "cd"
expect_exit 0 mr run --remote s3
assert_contains "$T_ERR" "0 executed, 3 cached" "run --remote against S3 executes nothing"
# a sweep shares the remote cache: each point of the grid pushes, and a clone's sweep executes nothing
sw1=$(new_ws remote15)
cp "$one/clicks.csv" "$sw1/"
cd "$sw1" || fail "cd"
cat >millrace.yaml <<'EOF'
params:
  thr: 3
stages:
  clean:
    op: transform
    input: clicks.csv
    steps:
      - filter: "clicks > ${params.thr}"
EOF
expect_exit 0 mr remote add s3 "s3://$MILLRACE_S3_BUCKET/sweep" --endpoint "$MILLRACE_S3_ENDPOINT"
expect_exit 0 mr run --sweep -S thr=3,5,7 --remote s3
sw2=$(new_ws remote16)
cp millrace.yaml clicks.csv "$sw2/"
cd "$sw2" || fail "cd"
expect_exit 0 mr run --sweep -S thr=3,5,7 --remote s3
expect_exit 0 mr runs --json
assert_eq "$(json '" ".join("%s:%d:%d" % (r["overrides"], r["n_executed"], r["n_cached"]) for r in sorted(d["runs"], key=lambda r: r["overrides"]))')" \
    "thr=3:0:1 thr=5:0:1 thr=7:0:1" "a clone's sweep with --remote executes none of its three points"
cd "$nine" || fail "cd"
# a remote that fails inside a run is a warning: the stages compute
ten=$(new_ws remote10)
cp millrace.yaml clicks.csv "$ten/"
cd "$ten" || fail "cd"
AWS_SECRET_ACCESS_KEY=wrong expect_exit 0 mr run --remote s3
assert_contains "$T_ERR" "3 executed" "with wrong keys the stages compute"
assert_contains "$T_ERR" "could not serve it" "and the run warns"
assert_contains "$T_ERR" "SignatureDoesNotMatch" "naming the service's answer"
cd "$five" || fail "cd"
AWS_SECRET_ACCESS_KEY=wrong expect_exit 1 mr pull
assert_contains "$T_ERR" "SignatureDoesNotMatch" "wrong keys: the service's answer, named"
assert_not_contains "$T_ERR" "wrong" "and no secret shown"
t_done
