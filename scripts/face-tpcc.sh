#!/usr/bin/env bash
# Seed 000 (FaCE) scaled to one machine: TPC-C with 16 terminals, 16 KiB pages, a DRAM buffer of
# about 2 % of the database and a flash cache of about 20 %, data on an emulated SATA SSD and on
# an emulated RAID-0 of 8 x 15k-RPM disks (latency emulated), the log on its own emulated SSD.
# Configurations: original (double-write buffer, no flash cache), FaCE dirty-only with --torn
# none, FaCE + Group Second Chance, and the LRU flash cache. Each run loads its own database
# (emulated devices start empty) and measures DURATION after a 5 s ramp-up.
#
#   scripts/face-tpcc.sh [WAREHOUSES] [DURATION] [OUTDIR]
#   FLASH=DEVICE (environment) names the flash cache device (default: an emulated SATA SSD of the
#   same size as the data device: a smaller emulated SSD has fewer spare blocks and stripes its
#   writes over fewer parallel units, e.g. 2 of 64 at 512 MiB, which makes it several times slower).
set -euo pipefail
cd "$(dirname "$0")/.."
W=${1:-1}
DUR=${2:-30s}
OUT=${3:-target/face-tpcc}
mkdir -p "$OUT"
cargo build --release -q -p pagoda
BIN=target/release/pagoda
# About 120 MiB of pages per warehouse: DRAM 2 %, flash cache 20 % of that.
DB_MIB=$((120 * W))
BUF_MIB=$(( (DB_MIB * 2 + 99) / 100 )); [ "$BUF_MIB" -lt 3 ] && BUF_MIB=3
FC_MIB=$(( DB_MIB * 20 / 100 ))
LOG="--log sata-ssd,capacity=1GiB,latency=emulate"
FLASH=${FLASH:-sata-ssd,capacity=4GiB,latency=emulate}
FC="--flash-cache $FLASH --flash-cache-size ${FC_MIB}MiB"
declare -A DATA=(
  [ssd]="sata-ssd,capacity=4GiB,latency=emulate"
  [hdd]="raid0-8x-hdd-15k,capacity=4GiB,latency=emulate"
)
declare -A CONF=(
  [original]="--torn doublewrite"
  [face]="--torn none $FC --flash-cache-policy face"
  [face-gsc]="--torn none $FC --flash-cache-policy face-gsc"
  [lru]="--torn none $FC --flash-cache-policy lru"
)
echo "flash cache device: $FLASH; ${W} warehouse(s), buffer ${BUF_MIB} MiB, flash cache ${FC_MIB} MiB, $DUR measured"
echo
echo "| data | config | tpmC | vs original | DRAM hit | flash hit | flash seq. writes | write-backs | data-device writes (4 KiB) |"
echo "|---|---|---|---|---|---|---|---|---|"
for dev in ssd hdd; do
  base=""
  for conf in original face face-gsc lru; do
    j="$OUT/$dev-$conf.json"
    # shellcheck disable=SC2086
    $BIN bench tpcc --warehouses "$W" --threads 16 --duration "$DUR" --buffer "${BUF_MIB}MiB" \
      --page-size 16KiB --data "${DATA[$dev]}" $LOG ${CONF[$conf]} --json "$j" >"$OUT/$dev-$conf.txt" 2>&1
    python3 - "$j" "$dev" "$conf" "${base:-}" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); dev, conf, base = sys.argv[2], sys.argv[3], sys.argv[4]
e = d["engine"]; fc = e.get("flash_cache") or {}
t = d["tpmC"]
ratio = f"{t / float(base):.2f}x" if base else "1.00x"
fh = f'{e["flash_cache_hit_ratio"]:.3f}' if "flash_cache_hit_ratio" in e else "–"
seq = f'{fc["sequential_fraction"]:.2f}' if fc else "–"
wb = f'{fc["write_backs"]:,}' if fc else "–"
dw = d["devices"]["data"]["host_write_pages"]
print(f"| {dev} | {conf} | {t:,.0f} | {ratio} | {e['buffer_hit_ratio']:.3f} | {fh} | {seq} | {wb} | {dw:,} |")
PY
    if [ "$conf" = original ]; then
      base=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['tpmC'])" "$j")
    fi
  done
done
