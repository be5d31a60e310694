#!/usr/bin/env bash
# The long crash test with faults: first the recovery sweep (every k-th read, write and flush
# of both devices failing inside Db::open, on SWEEP_IMAGES crashed images, default 40), then N
# cycles in all (default 100,000) spread over torn mode x commit mode x flash cache, every run
# with power cuts and every fault kind (--faults all: bit rot, also of superblock copies,
# failed reads and writes, misdirected and lost writes, failed fsyncs, a full device, slow
# devices; faults that fail requests stay armed through recovery). One JSON per run in $OUT;
# with PUBLISH=FILE the sweep's result and each run's rows (one per fault kind) are appended to
# that generated page (docs/results/crashtest-faults.md). Exits non-zero when a run fails.
# Usage: scripts/crashtest-long.sh [N] [SEED]
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
N=${1:-100000}
SEED=${2:-1}
OUT=${OUT:-target/crashtest-long}
mkdir -p "$OUT"
cargo build --release -q -p pagoda
# The crash tester is its own binary (built with fault injection); `pagoda crashtest` runs it.
cargo build --release -q -p pagoda-crashtest-cli
P=target/release/pagoda
pub=()
if [ -n "${PUBLISH:-}" ]; then pub=(--publish "$PUBLISH"); fi

images=${SWEEP_IMAGES:-40}
start=$(date +%s)
if PAGODA_SWEEP_IMAGES=$images cargo test --release -q -p pagoda-crashtest --test recovery_sweep \
    -- --nocapture > "$OUT/recovery-sweep.txt" 2>&1; then
  sweep=pass
else
  sweep=FAIL
  status=1
fi
opens=$(grep -c 'opens failed with the fault' "$OUT/recovery-sweep.txt" || true)
echo "recovery sweep: $images images, $opens sweeps, $(( $(date +%s) - start )) s, $sweep"

# torn:commit:flash-cache device ("-": none)
runs=(doublewrite:sync:- doublewrite:pipelined:- doublewrite:lazy:- doublewrite-full:sync:-
      atomic:sync:- atomic:pipelined:- atomic:lazy:- none:sync:-
      none:sync:mem none:pipelined:mem none:lazy:mem atomic:sync:mem)
per=$(( (N + ${#runs[@]} - 1) / ${#runs[@]} ))
for r in "${runs[@]}"; do
  IFS=: read -r torn commit flash <<< "$r"
  fc=(); name="$torn-$commit"
  if [ "$flash" != - ]; then fc=(--flash-cache "$flash"); name="$name-flash"; fi
  start=$(date +%s)
  if "$P" crashtest "${pub[@]}" --torn "$torn" --commit "$commit" "${fc[@]}" --faults all \
      --cycles "$per" --seed "$SEED" --device mem,atomic=4KiB --page-size 4KiB \
      --json "$OUT/$name.json" > "$OUT/$name.txt" 2> "$OUT/$name.err"; then
    result=pass
  else
    result=FAIL; status=1
  fi
  echo "$name: $per cycles, $(( $(date +%s) - start )) s, $result: $(tail -1 "$OUT/$name.txt")"
done
if [ -n "${PUBLISH:-}" ]; then
  # After the runs' tables (each run appends its rows to the last table of the page).
  printf '\n%s\n' "Recovery sweep (\`PAGODA_SWEEP_IMAGES=$images cargo test --release -p \
pagoda-crashtest --test recovery_sweep\`, run by \`scripts/crashtest-long.sh\` before the runs): \
$images crashed images, $opens sweeps (the k-th read, write or flush of the data or log device \
failing inside \`Db::open\`, transient and persistent, for every k until the open completes), \
each reopened on a healthy device and verified exactly: $sweep." >> "$PUBLISH"
fi
exit $status
