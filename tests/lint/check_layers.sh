#!/usr/bin/env bash
# The module graph is one-way (docs/architecture.md):
#   cli -> ops / pipeline / serve / report -> ml / data / store -> core
# Each room of src/ may include the public headers (include/millrace/X.h) of
# the rooms below it, its own private headers, and nothing else; cli/ may
# include only include/millrace/ and its own cli.h. Prints every violation
# as file:line and exits 1 if there is any.
set -u
root=${1:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root" || exit 2

# Which room each public header belongs to.
declare -A room=(
  [core]=core [value]=core [s3]=core
  [store]=store
  [table]=data [csv]=data [jsonl]=data [parquet]=data [dataset]=data [io]=data
  [expr]=data [transform]=data [pit]=data [online]=data [loader]=data [stats]=data [image]=data [webdataset]=data
  [gbdt]=ml [linear]=ml [model]=ml [split]=ml [features]=ml [metrics]=ml
  [check]=ml [tune]=ml [bundle]=ml [profile]=ml
  [op]=pipeline [remote]=pipeline [spec]=pipeline [runstore]=pipeline [registry]=pipeline [pipeline]=pipeline [job]=pipeline
  [serve]=serve
  [ui]=ui
  [report]=report [runreport]=report
  [millrace]=umbrella
)
# Which rooms each room of src/ may include.
declare -A may=(
  [core]="core"
  [store]="core store"
  [data]="core data"
  [ml]="core data ml"
  [pipeline]="core store data ml pipeline"
  [serve]="core data ml serve"
  [report]="core store data ml pipeline report"
  [ui]="core store data ml pipeline report ui"
  [ops]="core store data ml pipeline report ops"
)

bad=0
fail() { echo "$1: $2"; bad=1; }

for dir in src/*/; do
  r=$(basename "$dir")
  allowed=${may[$r]:-}
  if [ -z "$allowed" ]; then fail "$dir" "room '$r' is not in the module graph (tests/lint/check_layers.sh)"; continue; fi
  while IFS=: read -r file line text; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"$text")
    case "$inc" in
      millrace/*.h)
        h=${inc#millrace/}; h=${h%.h}
        hr=${room[$h]:-}
        if [ -z "$hr" ]; then fail "$file:$line" "'$inc' is not assigned to a room (tests/lint/check_layers.sh)"; continue; fi
        case " $allowed " in *" $hr "*) ;; *) fail "$file:$line" "room '$r' includes '$inc' of room '$hr' (allowed: $allowed)";; esac
        ;;
      *)
        # a private header: next to the file, or "ROOM/..." from src/; either
        # way it must lie in the file's own room
        if [ -f "$(dirname "$file")/$inc" ]; then p=$(realpath -m --relative-to=src "$(dirname "$file")/$inc")
        elif [ -f "src/$inc" ]; then p=$inc
        else fail "$file:$line" "'$inc' is not a header of room '$r'"; continue; fi
        case "$p" in "$r"/*) ;; *) fail "$file:$line" "room '$r' includes private header '$inc' of another room";; esac
        ;;
    esac
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' -r "$dir" --include='*.c' --include='*.h')
done

# cli/ proves the public API suffices: include/millrace/ and its own cli.h only.
while IFS=: read -r file line text; do
  inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"$text")
  case "$inc" in
    millrace/*.h) [ -f "include/$inc" ] || fail "$file:$line" "'$inc' is not a public header" ;;
    cli.h) ;;
    *) fail "$file:$line" "cli includes '$inc' (only include/millrace/ and cli.h)" ;;
  esac
done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' -r cli --include='*.c' --include='*.h')

# Public headers include only public headers of their own room or below.
for h in include/millrace/*.h; do
  b=$(basename "$h" .h); hr=${room[$b]:-}
  [ -n "$hr" ] || { fail "$h" "not assigned to a room (tests/lint/check_layers.sh)"; continue; }
  [ "$hr" = umbrella ] && continue
  allowed=${may[$hr]}
  while IFS=: read -r line text; do
    inc=$(sed -E 's/^[[:space:]]*#[[:space:]]*include[[:space:]]+"([^"]+)".*/\1/' <<<"$text")
    i=${inc#millrace/}; i=${i%.h}; ir=${room[$i]:-?}
    case " $allowed " in *" $ir "*) ;; *) fail "$h:$line" "public header of room '$hr' includes '$inc' (room '$ir')";; esac
  done < <(grep -nE '^[[:space:]]*#[[:space:]]*include[[:space:]]+"' "$h")
done

if [ $bad -ne 0 ]; then echo "check_layers: the module graph has violations (see docs/architecture.md)"; exit 1; fi
echo "check_layers: ok ($(ls -d src/*/ | wc -l) rooms, cli, $(ls include/millrace/*.h | wc -l) public headers)"
