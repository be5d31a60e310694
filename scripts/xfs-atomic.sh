#!/usr/bin/env bash
# Real 16 KiB atomic writes on Linux: TPC-C with --torn atomic | doublewrite | none on files of
# an XFS file system (reflink on, so the kernel writes RWF_ATOMIC pages untorn in software by
# copy-on-write remap) that this script builds in a sparse image on a loop device.
#
#   scripts/xfs-atomic.sh [bench | kill | all]          (default: bench)
#
# bench: the three torn modes, same warehouses / threads / duration / buffer, each on fresh
#        files; a table of tpmC with the ratios, and JSON in $OUT/xfs-atomic.json.
# kill:  a writer on the XFS files with --torn atomic is SIGKILLed at random times, KILLS times;
#        after each kill the database is reopened (recovery) and checked: offline page and log
#        verification (pagoda inspect), then a TPC-C run with --check (consistency conditions
#        1-4 over everything committed before the kill).
#
# Environment (defaults in brackets): WAREHOUSES [1], THREADS [4], DURATION [30s],
# BUFFER [8MiB], PAGE [16KiB], DIRECT [1: the data file is O_DIRECT in every mode, as RWF_ATOMIC
# needs, so the modes differ only in torn-write protection], IMG_SIZE [4G], LOG_MIB [256],
# MAX_ATOMIC [empty: the kernel's default; else the XFS mount option max_atomic_write],
# KILLS [5], OUT [target/xfs-atomic], WORK [a new directory under /var/tmp], PAGODA [the release
# binary, built when missing], INSTALL [1: apt-get install xfsprogs when mkfs.xfs is missing].
#
# Needs root, loop devices, mkfs.xfs and a kernel whose XFS offers atomic writes (Linux >= 6.16);
# where one is missing it says so in one line and exits 0. The mount, the loop device and the
# image are removed on exit, on error and on interrupt.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-bench}
WAREHOUSES=${WAREHOUSES:-1}
THREADS=${THREADS:-4}
DURATION=${DURATION:-30s}
BUFFER=${BUFFER:-8MiB}
PAGE=${PAGE:-16KiB}
DIRECT=${DIRECT:-1}
IMG_SIZE=${IMG_SIZE:-4G}
LOG_MIB=${LOG_MIB:-256}
MAX_ATOMIC=${MAX_ATOMIC:-}
KILLS=${KILLS:-5}
OUT=${OUT:-target/xfs-atomic}
INSTALL=${INSTALL:-1}

skip() {
  echo "xfs-atomic: skipped: $*"
  exit 0
}
case "$MODE" in bench | kill | all) ;; *)
  echo "usage: $0 [bench|kill|all]" >&2
  exit 2
  ;;
esac

[ "$(uname -s)" = Linux ] || skip "not Linux (RWF_ATOMIC and statx atomic limits are Linux's)"
[ "$(id -u)" = 0 ] || skip "needs root to attach a loop device and mount it (run with sudo)"
command -v losetup >/dev/null || skip "no losetup (util-linux)"
[ -e /dev/loop-control ] || ls /dev/loop[0-9]* >/dev/null 2>&1 || skip "no loop devices (/dev/loop-control missing; modprobe loop)"
if ! command -v mkfs.xfs >/dev/null; then
  if [ "$INSTALL" = 1 ] && command -v apt-get >/dev/null; then
    echo "xfs-atomic: installing xfsprogs" >&2
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq xfsprogs; } >/dev/null 2>&1 || true
  fi
  command -v mkfs.xfs >/dev/null || skip "no mkfs.xfs and it could not be installed (apt-get install xfsprogs)"
fi
grep -qw xfs /proc/filesystems || modprobe xfs 2>/dev/null || true
grep -qw xfs /proc/filesystems || skip "this kernel has no XFS (modprobe xfs failed)"
command -v python3 >/dev/null || skip "python3 is needed to read the benchmark JSON"

PAGODA=${PAGODA:-}
if [ -z "$PAGODA" ]; then
  TARGET=${CARGO_TARGET_DIR:-target}
  PAGODA=$TARGET/release/pagoda
  [ -x "$PAGODA" ] || cargo build --release -q -p pagoda
fi
[ -x "$PAGODA" ] || skip "no pagoda binary at $PAGODA"
mkdir -p "$OUT"

# Everything this script creates, undone on any exit. A pagoda child runs in the background
# and is waited for, so a TERM to the script kills it before the unmount (not after).
WORK=${WORK:-}
OWN_WORK=0
LOOP=""
MNT=""
CHILD=""
cleanup() {
  set +e
  if [ -n "$CHILD" ]; then
    kill -KILL "$CHILD" 2>/dev/null
    wait "$CHILD" 2>/dev/null
  fi
  if [ -n "$MNT" ] && mountpoint -q "$MNT"; then
    umount "$MNT" 2>/dev/null || { sleep 1; umount "$MNT" 2>/dev/null; } || umount -l "$MNT"
  fi
  [ -n "$LOOP" ] && losetup -d "$LOOP" 2>/dev/null
  if [ "$OWN_WORK" = 1 ]; then
    rm -f "$WORK/xfs.img"
    rmdir "$WORK/mnt" "$WORK" 2>/dev/null
  fi
}
trap cleanup EXIT
trap 'echo "xfs-atomic: interrupted" >&2; exit 130' INT
trap 'echo "xfs-atomic: terminated" >&2; exit 143' TERM

# Runs a command in the background and waits for it (see cleanup); returns its status.
run() {
  "$@" &
  CHILD=$!
  local rc=0
  wait "$CHILD" || rc=$?
  CHILD=""
  return "$rc"
}

if [ -z "$WORK" ]; then
  WORK=$(mktemp -d /var/tmp/pagoda-xfs.XXXXXX)
  OWN_WORK=1
fi
IMG=$WORK/xfs.img
mkdir -p "$WORK/mnt"
truncate -s "$IMG_SIZE" "$IMG"
mkfs.xfs -q -f -m reflink=1 -b size=4096 "$IMG" || skip "mkfs.xfs -m reflink=1 failed (xfsprogs too old for reflink?)"
LOOP=$(losetup -f --show "$IMG") || skip "no free loop device"
mount_xfs() {
  local opts=${1:-}
  if [ -n "$opts" ]; then mount -t xfs -o "$opts" "$LOOP" "$WORK/mnt"; else mount -t xfs "$LOOP" "$WORK/mnt"; fi
}
if [ -n "$MAX_ATOMIC" ]; then
  mount_xfs "max_atomic_write=$MAX_ATOMIC" 2>/dev/null || skip "mount -o max_atomic_write=$MAX_ATOMIC refused (kernel before 6.16, or too large for this file system)"
else
  mount_xfs 2>/dev/null || skip "mounting the XFS image failed"
fi
MNT=$WORK/mnt

# Does this kernel write $PAGE atomically on these files? The engine's own open answers (statx).
probe() {
  rm -f "$MNT/probe.data" "$MNT/probe.log"
  local rc=0
  "$PAGODA" bench ycsb --records 50 --ops 50 --threads 1 --page-size "$PAGE" --buffer 1MiB \
    --data "file:$MNT/probe.data" --log "file:$MNT/probe.log,capacity=16MiB" --torn atomic \
    >"$OUT/probe.txt" 2>&1 || rc=$?
  rm -f "$MNT/probe.data" "$MNT/probe.log"
  return "$rc"
}
if ! probe; then
  if [ -z "$MAX_ATOMIC" ] && grep -q "do not cover" "$OUT/probe.txt"; then
    # The kernel's default maximum is below the page: ask for the page at mount.
    umount "$MNT"
    mount_xfs "max_atomic_write=$PAGE" 2>/dev/null || mount_xfs
    MAX_ATOMIC=$PAGE
  fi
  probe || skip "no $PAGE atomic writes on XFS here: $(grep -o 'statx[^.]*' "$OUT/probe.txt" | head -1 || tail -1 "$OUT/probe.txt")"
fi
KERNEL=$(uname -r)
echo "xfs-atomic: XFS (reflink) on $LOOP at $MNT, kernel $KERNEL, mount options: $(findmnt -no OPTIONS "$MNT")"

# Fresh data and log files: the log written out first (no block allocation on log writes).
fresh() {
  rm -f "$MNT/data" "$MNT/log"
  dd if=/dev/zero of="$MNT/log" bs=1M count="$LOG_MIB" status=none
  sync -f "$MNT/log"
}
data_dev() { echo "file:$MNT/data,direct=$DIRECT"; }
log_dev() { echo "file:$MNT/log,capacity=${LOG_MIB}MiB"; }

bench() {
  local modes=(atomic doublewrite none)
  for m in "${modes[@]}"; do
    fresh
    echo "xfs-atomic: tpcc --torn $m: $WAREHOUSES warehouse(s), $THREADS threads, $DURATION, buffer $BUFFER, page $PAGE" >&2
    run "$PAGODA" bench tpcc --warehouses "$WAREHOUSES" --threads "$THREADS" --duration "$DURATION" \
      --buffer "$BUFFER" --page-size "$PAGE" --seed 1 --data "$(data_dev)" --log "$(log_dev)" \
      --torn "$m" --json "$OUT/tpcc-$m.json" >"$OUT/tpcc-$m.txt" 2>&1 ||
      { echo "xfs-atomic: tpcc --torn $m failed; see $OUT/tpcc-$m.txt" >&2; tail -3 "$OUT/tpcc-$m.txt" >&2; exit 1; }
  done
  python3 - "$OUT" "$KERNEL" "$(findmnt -no OPTIONS "$MNT")" "$WAREHOUSES" "$THREADS" "$DURATION" "$BUFFER" "$PAGE" "$DIRECT" <<'PY'
import json, sys, platform, datetime, os
out, kernel, mnt_opts, w, threads, dur, buf, page, direct = sys.argv[1:]
runs = {m: json.load(open(f"{out}/tpcc-{m}.json")) for m in ("atomic", "doublewrite", "none")}
t = {m: r["tpmC"] for m, r in runs.items()}
def ratio(a, b):
    return t[a] / t[b] if t[b] else None
ratios = {"none/doublewrite": ratio("none", "doublewrite"),
          "atomic/doublewrite": ratio("atomic", "doublewrite"),
          "atomic/none": ratio("atomic", "none")}
print(f"| torn mode | tpmC | data writes (4 KiB) | data write requests | data flushes |")
print("|---|---|---|---|---|")
for m in ("atomic", "doublewrite", "none"):
    d = runs[m]["devices"]["data"]
    print(f"| {m} | {t[m]:,.0f} | {d.get('host_write_pages', 0):,} | {d.get('host_write_requests', 0):,} | {d.get('flushes', 0):,} |")
print()
print("  ".join(f"{k} {v:.2f}" if v is not None else f"{k} -" for k, v in ratios.items()))
cpu = ""
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except Exception:
    pass
doc = {"command": "scripts/xfs-atomic.sh bench",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "machine": {"kernel": kernel, "cpu": cpu, "cpus": os.cpu_count(), "host": platform.node()},
       "file_system": {"type": "xfs", "mkfs": "mkfs.xfs -m reflink=1 -b size=4096", "on": "loop device over a sparse image", "mount_options": mnt_opts},
       "config": {"warehouses": int(w), "threads": int(threads), "duration": dur, "buffer": buf, "page_size": page, "data_direct": direct == "1"},
       "tpmC": t, "ratios": ratios,
       "runs": {m: {"tpmC": r["tpmC"], "config": r.get("config"), "engine": r.get("engine"), "devices": r.get("devices")} for m, r in runs.items()}}
json.dump(doc, open(f"{out}/xfs-atomic.json", "w"), indent=2)
print(f"\nJSON: {out}/xfs-atomic.json")
PY
}

# The writer is killed at a random point of its run; the reopen runs recovery.
killtest() {
  rm -rf "$MNT/db"
  # In a directory (data.pagoda with RWF_ATOMIC pages, log.pagoda), as pagoda inspect reads it.
  local base=(--warehouses "$WAREHOUSES" --threads "$THREADS" --buffer "$BUFFER" --page-size "$PAGE"
    --dir "$MNT/db" --torn atomic --seed 1)
  run "$PAGODA" bench tpcc "${base[@]}" --load-only >"$OUT/kill-load.txt" 2>&1 ||
    { echo "xfs-atomic: kill test load failed; see $OUT/kill-load.txt" >&2; exit 1; }
  local i
  for i in $(seq 1 "$KILLS"); do
    local after=$((2000 + RANDOM % 6000))
    "$PAGODA" bench tpcc "${base[@]}" --run-only --duration 60s >"$OUT/kill-$i.txt" 2>&1 &
    CHILD=$!
    sleep "$(printf '%d.%03d' $((after / 1000)) $((after % 1000)))"
    kill -KILL "$CHILD" 2>/dev/null || true
    wait "$CHILD" 2>/dev/null || true
    CHILD=""
    run "$PAGODA" inspect "$MNT/db" >"$OUT/kill-$i-inspect.txt" 2>&1 ||
      { echo "xfs-atomic: kill $i: inspect found damage after SIGKILL at ${after} ms; see $OUT/kill-$i-inspect.txt" >&2; exit 1; }
    run "$PAGODA" bench tpcc "${base[@]}" --run-only --duration 2s --check >"$OUT/kill-$i-check.txt" 2>&1 ||
      { echo "xfs-atomic: kill $i: reopen or TPC-C check failed after SIGKILL at ${after} ms; see $OUT/kill-$i-check.txt" >&2; exit 1; }
    echo "xfs-atomic: kill $i/$KILLS: SIGKILL after ${after} ms; recovered, inspect clean, TPC-C consistency 1-4 hold"
  done
}

case "$MODE" in
  bench) bench ;;
  kill) killtest ;;
  all) bench; killtest ;;
esac
