#!/usr/bin/env bash
# Real 16 KiB atomic writes on Linux: TPC-C with --torn atomic | doublewrite | none on files of
# an XFS file system (reflink on, so the kernel writes RWF_ATOMIC pages untorn in software by
# copy-on-write remap) that this script builds in a sparse image on a loop device.
#
#   scripts/xfs-atomic.sh [bench | kill | cost | all]          (default: bench)
#
# bench: first the cost of one durable page per torn mode without the engine (batches of 64
#        random 16 KiB pages: crates/pagoda/examples/atomic_cost.rs); then TPC-C in the three torn
#        modes, same warehouses / threads / duration / buffer, each on fresh files; a table of
#        tpmC with the ratios and XFS's own counters, and JSON in $OUT/xfs-atomic.json.
# cost:  only the page-write micro-benchmark, COST_RUNS [3] times.
# kill:  a writer on the XFS files with --torn atomic is SIGKILLed at a random time (2-12 s into
#        its run, ramp-up included), KILLS times;
#        after each kill the database is reopened (recovery) and checked: offline page and log
#        verification (pagoda inspect), then a TPC-C run with --check (consistency conditions
#        1-4 over everything committed before the kill).
#
# Environment (defaults in brackets): WAREHOUSES [1], THREADS [4], DURATION [30s],
# BUFFER [8MiB], LOAD_BUFFER [256MiB: the load's pool, then reopened with BUFFER], REPEAT [1: rounds
# of the three modes; the table shows the median], PAGE [16KiB], DIRECT [1: the data file is O_DIRECT in every mode, as RWF_ATOMIC
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
REPEAT=${REPEAT:-1}
LOAD_BUFFER=${LOAD_BUFFER:-256MiB}
OUT=${OUT:-target/xfs-atomic}
INSTALL=${INSTALL:-1}

skip() {
  echo "xfs-atomic: skipped: $*"
  exit 0
}
case "$MODE" in bench | kill | cost | all) ;; *)
  echo "usage: $0 [bench|kill|cost|all]" >&2
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

TARGET=${CARGO_TARGET_DIR:-target}
PAGODA=${PAGODA:-}
if [ -z "$PAGODA" ]; then
  PAGODA=$TARGET/release/pagoda
  [ -x "$PAGODA" ] || cargo build --release -q -p pagoda
fi
[ -x "$PAGODA" ] || skip "no pagoda binary at $PAGODA"
# The page-write micro-benchmark (crates/pagoda/examples/atomic_cost.rs), when it can be built.
COST=$TARGET/release/examples/atomic_cost
if [ "$MODE" != kill ] && [ ! -x "$COST" ] && command -v cargo >/dev/null; then
  cargo build --release -q -p pagoda --example atomic_cost || true
fi
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
# The script's own stderr, for trap messages that fire inside a redirected `run`.
exec 3>&2
trap cleanup EXIT
trap 'echo "xfs-atomic: interrupted; cleaning up" >&3; exit 130' INT
trap 'echo "xfs-atomic: terminated; cleaning up" >&3; exit 143' TERM

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

# XFS's own counters (this file system's when the kernel has them, else all XFS): extents
# allocated, transactions, log writes, log forces. Saved around each run: what a mode costs the
# file system beyond its own writes.
xfs_stats() {
  local f=/sys/fs/xfs/$(basename "$LOOP")/stats/stats
  [ -r "$f" ] || f=/sys/fs/xfs/stats/stats
  cat "$f" 2>/dev/null || true
}

bench() {
  local modes=(atomic doublewrite none) r m tag
  rm -f "$OUT/atomic-cost.json" "$OUT"/tpcc-*.json
  if [ -x "$COST" ]; then
    echo "xfs-atomic: one durable 16 KiB page per torn mode, batches of 64 random pages, no engine:" >&2
    # Not in a pipeline: `run` must execute in this shell, so that cleanup knows the child.
    run "$COST" "$MNT" 40 "$OUT/atomic-cost.json" >"$OUT/atomic-cost.txt"
    cat "$OUT/atomic-cost.txt"
    echo
  fi
  for r in $(seq 1 "$REPEAT"); do
    for m in "${modes[@]}"; do
      fresh
      tag=$m-$r
      echo "xfs-atomic: round $r/$REPEAT: tpcc --torn $m: $WAREHOUSES warehouse(s), $THREADS threads, $DURATION, buffer $BUFFER, page $PAGE" >&2
      xfs_stats >"$OUT/xfs-stats-$tag.before"
      run "$PAGODA" bench tpcc --warehouses "$WAREHOUSES" --threads "$THREADS" --duration "$DURATION" \
        --buffer "$BUFFER" --load-buffer "$LOAD_BUFFER" --page-size "$PAGE" --seed 1 \
        --data "$(data_dev)" --log "$(log_dev)" --torn "$m" --json "$OUT/tpcc-$tag.json" >"$OUT/tpcc-$tag.txt" 2>&1 ||
        { echo "xfs-atomic: tpcc --torn $m failed; see $OUT/tpcc-$tag.txt" >&2; tail -3 "$OUT/tpcc-$tag.txt" >&2; exit 1; }
      xfs_stats >"$OUT/xfs-stats-$tag.after"
    done
  done
  python3 - "$OUT" "$KERNEL" "$(findmnt -no OPTIONS "$MNT")" "$WAREHOUSES" "$THREADS" "$DURATION" "$BUFFER" "$PAGE" "$DIRECT" "$REPEAT" "$LOAD_BUFFER" <<'PY'
import json, sys, platform, datetime, os, statistics
out, kernel, mnt_opts, w, threads, dur, buf, page, direct, repeat, load_buf = sys.argv[1:]
modes = ("atomic", "doublewrite", "none")
rounds = range(1, int(repeat) + 1)
runs = {m: [json.load(open(f"{out}/tpcc-{m}-{r}.json")) for r in rounds] for m in modes}
def stats(path):
    d = {}
    for line in open(path):
        k, *v = line.split()
        d[k] = [int(x) for x in v if x.lstrip("-").isdigit()]
    return d
def xfs_delta(m, r):
    # Load and run together (the counters cannot tell them apart); the same load in every mode.
    try:
        a, b = stats(f"{out}/xfs-stats-{m}-{r}.before"), stats(f"{out}/xfs-stats-{m}-{r}.after")
    except Exception:
        return None
    g = lambda k, i: b.get(k, [0] * 9)[i] - a.get(k, [0] * 9)[i] if len(b.get(k, [])) > i else 0
    return {"extents_allocated": g("extent_alloc", 0), "blocks_allocated": g("extent_alloc", 1),
            "transactions": g("trans", 0) + g("trans", 1), "log_writes": g("log", 0),
            "log_kib": g("log", 1) // 2, "log_forces": g("log", 3)}
t = {m: statistics.median(r["tpmC"] for r in runs[m]) for m in modes}
def ratio(a, b):
    return t[a] / t[b] if t[b] else None
ratios = {"none/doublewrite": ratio("none", "doublewrite"),
          "atomic/doublewrite": ratio("atomic", "doublewrite"),
          "atomic/none": ratio("atomic", "none")}
xd = {m: [xfs_delta(m, r) for r in rounds] for m in modes}
print(f"| torn mode | tpmC{' (median)' if len(rounds) > 1 else ''} | each round | data writes (4 KiB) | data write requests | data flushes | XFS blocks allocated | XFS transactions | XFS log KiB | XFS log forces |")
print("|---|---|---|---|---|---|---|---|---|---|")
for m in modes:
    d = runs[m][-1]["devices"]["data"]
    x = xd[m][-1] or {}
    each = " / ".join(f"{r['tpmC']:,.0f}" for r in runs[m])
    print(f"| {m} | {t[m]:,.0f} | {each} | {d.get('host_write_pages', 0):,} | {d.get('host_write_requests', 0):,} | {d.get('flushes', 0):,} | {x.get('blocks_allocated', 0):,} | {x.get('transactions', 0):,} | {x.get('log_kib', 0):,} | {x.get('log_forces', 0):,} |")
print()
print("  ".join(f"{k} {v:.2f}" if v is not None else f"{k} -" for k, v in ratios.items()))
print("(device counters: the measured run of the last round; XFS counters: its load and run)")
cpu = ""
try:
    cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
except Exception:
    pass
doc = {"command": "scripts/xfs-atomic.sh bench",
       "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "machine": {"kernel": kernel, "cpu": cpu, "cpus": os.cpu_count(), "host": platform.node()},
       "file_system": {"type": "xfs", "mkfs": "mkfs.xfs -m reflink=1 -b size=4096", "on": "loop device over a sparse image", "mount_options": mnt_opts},
       "config": {"warehouses": int(w), "threads": int(threads), "duration": dur, "buffer": buf, "load_buffer": load_buf, "page_size": page, "data_direct": direct == "1", "rounds": int(repeat)},
       "tpmC": t, "ratios": ratios,
       "page_write_cost": json.load(open(f"{out}/atomic-cost.json")) if os.path.exists(f"{out}/atomic-cost.json") else None,
       "runs": {m: [{"tpmC": r["tpmC"], "xfs": xd[m][i], "config": r.get("config"), "engine": r.get("engine"), "devices": r.get("devices")} for i, r in enumerate(runs[m])] for m in modes}}
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
    local after=$((2000 + $(od -An -N2 -tu2 /dev/urandom) % 10000))
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
    local replayed
    replayed=$(grep -o '[0-9]* commit records replayed' "$OUT/kill-$i-check.txt" | head -1 || true)
    echo "xfs-atomic: kill $i/$KILLS: SIGKILL after ${after} ms; inspect clean; reopened (${replayed:-recovery ran}); TPC-C consistency 1-4 hold"
  done
}

# The page-write micro-benchmark alone, COST_RUNS times (its timings follow the VM's sync times).
cost() {
  [ -x "$COST" ] || skip "no atomic_cost example at $COST (cargo build --release -p pagoda --example atomic_cost)"
  local i
  for i in $(seq 1 "${COST_RUNS:-3}"); do
    run "$COST" "$MNT" 40 "$OUT/atomic-cost-$i.json" >"$OUT/atomic-cost-$i.txt"
    echo "run $i:"
    cat "$OUT/atomic-cost-$i.txt"
  done
}

case "$MODE" in
  cost) cost ;;
  bench) bench ;;
  kill) killtest ;;
  all) bench; killtest ;;
esac
