#!/usr/bin/env bash
# Reproduces the workload figures of the README: YCSB A and C (1M records, 2 threads, data fits
# the buffer), TPC-C at 1 and 4 warehouses, LinkBench (default mix), each on real files and on
# emulated sata-ssd devices (latency=emulate). Results: one JSON per run in $OUT.
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-target/figures}
DUR=${DUR:-20s}
mkdir -p "$OUT"
cargo build --release -p pagoda
P=target/release/pagoda
SSD="sata-ssd,capacity=8GiB,latency=emulate"

run() { # name, args...
  local name=$1; shift
  echo "== $name: pagoda $*" >&2
  "$P" "$@" --json "$OUT/$name.json" > "$OUT/$name.txt"
}

for dev in file ssd; do
  if [ "$dev" = file ]; then D=(); else D=(--data "$SSD" --log "$SSD"); fi
  for w in a c; do
    run "ycsb-$w-$dev" bench ycsb --workload $w --records 1000000 --threads 2 \
      --duration "$DUR" --buffer 2GiB "${D[@]}"
  done
  for wh in 1 4; do
    run "tpcc-$wh-$dev" bench tpcc --warehouses $wh --threads 2 --duration "$DUR" \
      --buffer 2GiB --check "${D[@]}"
  done
  run "linkbench-$dev" bench linkbench --nodes 100000 --threads 2 --duration "$DUR" \
    --buffer 1GiB "${D[@]}"
done
python3 - "$OUT" <<'PY'
import json, sys, glob, os
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.json"))):
    r = json.load(open(f))
    name = os.path.basename(f)[:-5]
    tp = r.get("tpmC")
    rows.append((name, r["throughput_ops_s"], tp, r["latency_us"]["p99"],
                 r["engine"].get("buffer_hit_ratio", 0), r["devices"]["data"].get("waf", 0)))
print("| run | ops/s | tpmC | p99 µs | buffer hit ratio | data WAF |")
print("|---|---|---|---|---|---|")
for n, t, tp, p99, hr, waf in rows:
    print(f"| {n} | {t:,.0f} | {'' if tp is None else f'{tp:,.0f}'} | {p99:,.0f} | {hr:.3f} | {waf:.2f} |")
PY
