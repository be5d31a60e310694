#!/usr/bin/env bash
# Runs the crash test with a flash cache (seed 000) over every policy x commit mode (face,
# face-gsc, lru x sync, pipelined; torn mode none; default 2,000 cycles each: 12,000 in all),
# plus each flash sabotage (which must be caught), and prints markdown tables. Results: one
# JSON per run in $OUT. Usage: scripts/crashtest-flash.sh [CYCLES] [DEVICE] [PAGE] [FLASH]
#   DEVICE  data and log devices (default mem,atomic=4KiB)
#   FLASH   flash cache device (default mem,atomic=0: no atomic writes, so that slots can tear)
# Environment: SEED (default 1), OUT (default target/crashtest-flash), FLASH_SIZE (default: the
# harness's, 4 buffer pools), SABOTAGE_CYCLES (default 1000), SABOTAGE_SEEDS (default 4).
# PUBLISH=FILE: each run also appends its row to that generated page (docs/results/crashtest.md).
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${1:-2000}
DEVICE=${2:-mem,atomic=4KiB}
PAGE=${3:-4KiB}
FLASH=${4:-mem,atomic=0}
SEED=${SEED:-1}
OUT=${OUT:-target/crashtest-flash}
SABOTAGE_CYCLES=${SABOTAGE_CYCLES:-1000}
SABOTAGE_SEEDS=${SABOTAGE_SEEDS:-4}
mkdir -p "$OUT"
cargo build --release -q -p pagoda
# The crash tester is its own binary (built with fault injection); `pagoda crashtest` runs it.
cargo build --release -q -p pagoda-crashtest-cli
P=${CARGO_TARGET_DIR:-target}/release/pagoda
# PUBLISH=FILE: every run also appends its row to that Markdown page (crashtest --publish).
pub=()
if [ -n "${PUBLISH:-}" ]; then pub=(--publish "$PUBLISH"); fi
size=()
if [ -n "${FLASH_SIZE:-}" ]; then size=(--flash-cache-size "$FLASH_SIZE"); fi

get() { # json, dotted key (missing: -)
  python3 -c "
import json, sys
v = json.load(open(sys.argv[1]))
for k in sys.argv[2].split('.'):
    v = v.get(k) if isinstance(v, dict) else None
print('-' if v is None else v)" "$1" "$2"
}

first_finding() { # json: kind and text of the first finding, or -
  python3 -c "
import json, sys
f = json.load(open(sys.argv[1]))['failures']
if not f or not f[0]['findings']:
    print('-')
else:
    x = f[0]['findings'][0]
    print('%s at cycle %s: %s' % (x['kind'], f[0]['cycle'], x['found'][:140].replace('|', '/')))" "$1"
}

printf '| policy | commit | cycles | acked commits | transactions checked | cuts during recovery | stale versions served | flash rebuilds | pages found in flash | write-backs | cuts: append | cuts: write-back | cuts: dir checkpoint | cuts: rebuild | corruption detected | seconds | result | first finding |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
status=0
for policy in face face-gsc lru; do
  for commit in sync pipelined; do
    j="$OUT/$policy-$commit.json"
    rm -f "$j"
    start=$(date +%s.%N)
    if "$P" crashtest "${pub[@]}" --torn none --commit "$commit" --cycles "$CYCLES" --seed "$SEED" \
        --device "$DEVICE" --page-size "$PAGE" --flash-cache "$FLASH" "${size[@]}" \
        --flash-cache-policy "$policy" --json "$j" \
        > "$OUT/$policy-$commit.txt" 2> "$OUT/$policy-$commit.err"; then
      result=pass
    else
      result=FAIL; status=1
    fi
    secs=$(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$start")
    if [ ! -s "$j" ]; then
      printf '| %s | %s | - | - | - | - | - | - | - | - | - | - | - | - | - | %s | %s | %s |\n' \
        "$policy" "$commit" "$secs" "$result" "$(tail -1 "$OUT/$policy-$commit.err")"
      continue
    fi
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' \
      "$policy" "$commit" "$(get "$j" cycles)" "$(get "$j" commits_acknowledged)" \
      "$(get "$j" transactions_checked)" "$(get "$j" cuts_during_recovery)" \
      "$(get "$j" flash.stale_versions_served)" "$(get "$j" flash.rebuilds)" \
      "$(get "$j" flash.rebuild_pages)" "$(get "$j" flash.write_backs)" \
      "$(get "$j" flash.cuts_append)" "$(get "$j" flash.cuts_write_back)" \
      "$(get "$j" flash.cuts_dir_checkpoint)" "$(get "$j" flash.cuts_rebuild)" \
      "$(get "$j" corruption_detected)" "$secs" "$result" "$(first_finding "$j")"
  done
done

# Each sabotage runs with one thread and seeds SEED, SEED+1, ... until it is caught with the
# damage it leaves (a page lost or damaged); a control run of the same seed and cycles without
# the sabotage must pass (else the catch may be one of the engine's own defects).
printf '\n| sabotage | policy | seed | caught after cycles | control without it | first finding |\n|---|---|---|---|---|---|\n'
for sab in flash-unsynced-writeback flash-trust-torn-slots; do
  caught=NOT-CAUGHT; first=-; seed=$SEED; control=-
  for ((i = 0; i < SABOTAGE_SEEDS; i++)); do
    seed=$((SEED + i))
    j="$OUT/sabotage-$sab.json"
    rm -f "$j"
    if ! "$P" crashtest "${pub[@]}" --torn none --cycles "$SABOTAGE_CYCLES" --seed "$seed" --threads 1 \
        --device "$DEVICE" --page-size "$PAGE" --flash-cache "$FLASH" "${size[@]}" \
        --sabotage "$sab" --json "$j" > /dev/null 2> "$OUT/sabotage-$sab.err"; then
      if [ -s "$j" ]; then
        first=$(first_finding "$j")
        case "$first" in
          corruption*|lost-commit*) ;;
          *) first="(seed $seed: $first)"; continue ;; # not the damage the sabotage leaves
        esac
        caught=$(get "$j" cycles)
        if "$P" crashtest "${pub[@]}" --torn none --cycles "$caught" --seed "$seed" --threads 1 \
            --device "$DEVICE" --page-size "$PAGE" --flash-cache "$FLASH" "${size[@]}" \
            > /dev/null 2> "$OUT/sabotage-$sab-control.err"; then
          control=pass
        else
          control=FAIL
        fi
      else
        caught=ERROR; first=$(tail -1 "$OUT/sabotage-$sab.err")
      fi
      break
    fi
  done
  if [ "$caught" = NOT-CAUGHT ] || [ "$caught" = ERROR ] || [ "$control" = FAIL ]; then status=1; fi
  printf '| %s | face | %s | %s | %s | %s |\n' "$sab" "$seed" "$caught" "$control" "$first"
done
exit $status
