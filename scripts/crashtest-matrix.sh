#!/usr/bin/env bash
# Runs the crash test over every torn mode x commit mode (default 2,000 cycles each: 24,000 in
# all), plus each sabotage (which must be caught), and prints one table row per run. Results:
# one JSON per run in $OUT; with PUBLISH=FILE also one row per run in that generated page
# (docs/results/crashtest.md). Usage: scripts/crashtest-matrix.sh [CYCLES] [DEVICE] [PAGE]
set -euo pipefail
cd "$(dirname "$0")/.."
CYCLES=${1:-2000}
DEVICE=${2:-mem,atomic=4KiB}
PAGE=${3:-4KiB}
SEED=${SEED:-1}
OUT=${OUT:-target/crashtest}
mkdir -p "$OUT"
cargo build --release -q -p pagoda
# The crash tester is its own binary (built with fault injection); `pagoda crashtest` runs it.
cargo build --release -q -p pagoda-crashtest-cli
P=target/release/pagoda
# PUBLISH=FILE: every run also appends its row to that Markdown page (crashtest --publish).
pub=()
if [ -n "${PUBLISH:-}" ]; then pub=(--publish "$PUBLISH"); fi

field() { # json, key
  python3 -c "import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])" "$1" "$2"
}

printf '| torn | commit | cycles | acked commits | transactions checked | deepest tree | cuts during recovery | ddl ops | torn pages repaired | corruption detected | 512 B tears | seconds | result |\n'
printf '|---|---|---|---|---|---|---|---|---|---|---|---|---|\n'
status=0
for torn in doublewrite doublewrite-full atomic none; do
  for commit in sync pipelined lazy; do
    j="$OUT/$torn-$commit.json"
    start=$(date +%s.%N)
    if "$P" crashtest "${pub[@]}" --torn "$torn" --commit "$commit" --cycles "$CYCLES" --seed "$SEED" \
        --device "$DEVICE" --page-size "$PAGE" --json "$j" > "$OUT/$torn-$commit.txt" 2> "$OUT/$torn-$commit.err"; then
      result=pass
    else
      result=FAIL; status=1
    fi
    secs=$(python3 -c "import time,sys; print(round(time.time()-float(sys.argv[1]),1))" "$start")
    printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n' "$torn" "$commit" \
      "$(field "$j" cycles)" "$(field "$j" commits_acknowledged)" "$(field "$j" transactions_checked)" \
      "$(field "$j" deepest_tree)" "$(field "$j" cuts_during_recovery)" "$(field "$j" ddl_operations)" \
      "$(field "$j" torn_pages_repaired)" "$(field "$j" corruption_detected)" \
      "$(field "$j" torn_512_sectors)" "$secs" "$result"
  done
done

printf '\n| sabotage | torn | commit | caught after cycles | first finding |\n|---|---|---|---|---|\n'
for row in skip-log-sync:doublewrite:sync skip-doublewrite:doublewrite:sync \
    ack-before-durable:doublewrite:sync ack-before-durable:atomic:pipelined \
    skip-wal-rule:atomic:pipelined skip-checkpoint-flush:doublewrite:sync \
    skip-doublewrite:doublewrite-full:sync drop-ops-of-imaged-records:doublewrite:sync \
    salvage-torn-log:atomic:lazy \
    non-atomic-pages:atomic:sync visible-before-durable:atomic:pipelined; do
  IFS=: read -r sab torn commit <<< "$row"
  j="$OUT/sabotage-$sab-$torn-$commit.json"
  if "$P" crashtest "${pub[@]}" --torn "$torn" --commit "$commit" --cycles 1000 --seed "$SEED" \
      --device "$DEVICE" --page-size "$PAGE" --sabotage "$sab" --json "$j" > /dev/null 2>&1; then
    caught=NOT-CAUGHT; status=1
  else
    caught=$(field "$j" cycles)
  fi
  first=$(python3 -c "import json,sys; f=json.load(open(sys.argv[1]))['failures']; print(f[0]['findings'][0]['kind'] if f else '-')" "$j")
  printf '| %s | %s | %s | %s | %s |\n' "$sab" "$torn" "$commit" "$caught" "$first"
done
exit $status
