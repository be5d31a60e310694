#!/usr/bin/env bash
# Seed 003 with a real database: MariaDB (InnoDB 16 KiB pages, innodb_flush_method=O_DIRECT so
# each page write reaches `pagoda mount` whole) on an emulated, preconditioned SATA SSD.
#
#   scripts/mariadb-atomic.sh bench [EVENTS]   three runs, equal sysbench oltp_write_only
#       transactions each: double-write on; off on a device without atomic writes; off on a
#       device with atomic=16KiB. The seed's columns (throughput, data written, flash writes,
#       GC) and its 1.5-2.2x beside ours. Then the mount's own cost: the same MariaDB on a
#       plain directory (tmpfs) against the mount on a RAM device, with 8 worker threads and
#       with none (one request at a time).
#   scripts/mariadb-atomic.sh crash [CUTS]     per configuration, CUTS power cuts under load
#       (sysbench plus a client that logs each acknowledged INSERT to a file outside the
#       mount) through MOUNT/.pagoda/control; each time: remount from the --backing image,
#       innochecksum every tablespace (torn pages), start MariaDB (crash recovery), CHECK
#       TABLE, every acknowledged row present, clean shutdown, innochecksum again.
#
# Each mode writes its table into docs/results/mariadb-atomic.md (the other mode's table is
# kept), with machine, date, commit and command. Logs go to OUT (target/mariadb-atomic).
# Environment: DEVICE (sata-ssd,capacity=1GiB,streams=1,precondition=1,latency=emulate; the
# script adds atomic=0 or atomic=16KiB), CRASH_DEVICE (crash: sata-ssd,capacity=1GiB,streams=1,
# latency=emulate), TABLES (4), TABLE_SIZE (25000), THREADS (4), REPEAT
# (bench: 3 rounds of all runs, medians shown),
# BUFFER_POOL (8M: far below the tables, so pages are flushed all the time), PAGODA (a built
# binary; default: cargo build --release), OUT, PAGE (the results page).
# Needs root and /dev/fuse; installs mariadb-server and sysbench from Debian when missing.
# Every mariadbd, client, pagoda mount and tmpfs it starts is stopped on exit, error or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
NAME=mariadb-atomic
MODE=${1:-bench}
COMMAND="scripts/mariadb-atomic.sh $*"
DEVICE=${DEVICE:-sata-ssd,capacity=1GiB,streams=1,precondition=1,latency=emulate}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-25000}
THREADS=${THREADS:-4}
BUFFER_POOL=${BUFFER_POOL:-8M}
OUT=${OUT:-target/mariadb-atomic}
PAGE=${PAGE:-docs/results/mariadb-atomic.md}
# shellcheck source=scripts/mariadb-lib.sh
. scripts/mariadb-lib.sh
case $MODE in
  bench) EVENTS=${2:-2000} REPEAT=${REPEAT:-3} ;;
  crash) CUTS=${2:-5} ;;
  *) echo "usage: $0 bench [EVENTS] | crash [CUTS]" >&2; exit 2 ;;
esac
mdb_setup
PAGE=$(cd "$(dirname "$PAGE")" && pwd)/$(basename "$PAGE")
# Which build made the figures (a debug build's file system is slower than a release one).
export PAGODA_SHOWN=$PAGODA

MYSQLD_OPTS=(--innodb-flush-method=O_DIRECT --innodb-buffer-pool-size="$BUFFER_POOL" --innodb-io-capacity=2000)

sysbench_cmd() {
  SB=(sysbench oltp_write_only --db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root
      --mysql-db=sbtest --tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$THREADS")
}

# bench_run LABEL WHERE DWB [pagoda mount args]: WHERE is `mount` or `plain` (tmpfs). Sets ROW
# to "tps host_write_pages flash_programs gc_runs copybacks peak_in_flight" of the run phase
# (not in a $(...) subshell: the EXIT trap must see the processes it starts).
bench_run() {
  local label=$1 where=$2 dwb=$3; shift 3
  local work data
  mdb_workdir; work=$WORK
  if [ "$where" = mount ]; then
    mdb_mount "$work/mnt" "$OUT/$label-mount.log" "$@" --json "$OUT/$label-final.json"
    data=$work/mnt/data
  else
    mdb_tmpfs "$work/plain"
    data=$work/plain/data
  fi
  mdb_install "$data" "$OUT/$label-install.log"
  mdb_start "$data" "$work/mysqld.sock" "$OUT/$label-mysqld.err" "${MYSQLD_OPTS[@]}" \
    --innodb-doublewrite="$dwb" || die "mariadbd did not start ($OUT/$label-mysqld.err)"
  mdb_sql "CREATE DATABASE sbtest"
  sysbench_cmd
  "${SB[@]}" prepare >"$OUT/$label-prepare.log"
  # Counters of the run phase only.
  [ "$where" = mount ] && echo reset-stats >"$MNT/.pagoda/control"
  "${SB[@]}" --events="$EVENTS" --time=0 run >"$OUT/$label-sysbench.log"
  local stats=none
  if [ "$where" = mount ]; then cp "$MNT/.pagoda/stats.json" "$OUT/$label-run.json"; stats=$OUT/$label-run.json; fi
  mdb_stop
  mdb_unmount
  mdb_cleanup
  ROW=$(python3 - "$stats" "$OUT/$label-sysbench.log" <<'EOF'
import json, re, sys
tps = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", open(sys.argv[2]).read()).group(1)
if sys.argv[1] == "none":
    print(tps, 0, 0, 0, 0, 0)
else:
    j = json.load(open(sys.argv[1]))
    s = j["device_stats"]
    print(tps, s["host_write_pages"], s["flash_programs"], s["gc_runs"], s["copybacks"],
          j["fs"]["peak_io_in_flight"])
EOF
)
}

# write_section NAME FILE DEVICE: puts FILE's text into the results page between NAME's markers.
write_section() {
  python3 - "$PAGE" "$1" "$2" "$COMMAND" "$3" <<'EOF'
import os, platform, re, subprocess, sys, datetime
page, name, body, command, device = sys.argv[1:6]
text = open(page).read() if os.path.exists(page) else ""
def sh(c):
    return subprocess.run(c, shell=True, capture_output=True, text=True).stdout.strip()
cpu = sh("grep -m1 'model name' /proc/cpuinfo | cut -d: -f2").strip()
head = ("# MariaDB on `pagoda mount`: double-write off, atomic 16 KiB pages (seed 003)\n\n"
        "Generated by `scripts/mariadb-atomic.sh` (do not edit by hand; each mode rewrites its "
        "section). MariaDB " + sh("mariadbd --version | awk '{print $3}'") +
        ", InnoDB 16 KiB pages, `innodb_flush_method=O_DIRECT`, `innodb_flush_log_at_trx_commit=1`; "
        "load: sysbench `oltp_write_only` (Debian's sysbench " + sh("sysbench --version | awk '{print $2}'") + ").\n")
if not text.startswith("# "):
    text = head
else:
    text = head + text[text.index("\n<!-- ") if "\n<!-- " in text else len(text):]
stamp = (f"\nMachine: {os.cpu_count()} cores ({cpu}), Linux {platform.release()}; "
         f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; commit "
         f"{sh('git rev-parse --short HEAD')}{' (uncommitted changes)' if sh('git status --porcelain -- crates scripts') else ''}; "
         f"device `{device}`; binary `{os.environ.get('PAGODA_SHOWN', '')}`; command `{command}`.\n")
section = f"<!-- {name} -->\n" + open(body).read().rstrip() + "\n" + stamp + f"<!-- /{name} -->\n"
pat = re.compile(rf"<!-- {name} -->.*?<!-- /{name} -->\n", re.S)
text = pat.sub(lambda m: section, text) if pat.search(text) else text.rstrip() + "\n\n" + section
open(page, "w").write(text)
EOF
}

bench() {
  echo "$NAME bench: sysbench oltp_write_only, $TABLES tables x $TABLE_SIZE rows, $THREADS threads, $EVENTS transactions each, buffer pool $BUFFER_POOL"
  # Rounds of all six runs, so that a slow spell of the shared machine hits every one alike;
  # the table shows medians. rows[i]: the rounds of run i, ';'-separated.
  local rows=("" "" "" "" "" "") r
  for ((r = 1; r <= REPEAT; r++)); do
    bench_run dwb-on-$r mount ON --device "$DEVICE,atomic=0";                  rows[0]+="$ROW;"; echo "round $r, double-write on:             $ROW"
    bench_run dwb-off-$r mount OFF --device "$DEVICE,atomic=0";                rows[1]+="$ROW;"; echo "round $r, double-write off, no atomic: $ROW"
    bench_run dwb-off-atomic-$r mount OFF --device "$DEVICE,atomic=16KiB";     rows[2]+="$ROW;"; echo "round $r, double-write off, atomic:    $ROW"
    bench_run plain-tmpfs-$r plain ON;                                         rows[3]+="$ROW;"; echo "round $r, plain directory (tmpfs):     $ROW"
    bench_run mem-8-threads-$r mount ON --device mem,capacity=1GiB --threads 8; rows[4]+="$ROW;"; echo "round $r, mount on RAM, 8 threads:     $ROW"
    bench_run mem-0-threads-$r mount ON --device mem,capacity=1GiB --threads 0; rows[5]+="$ROW;"; echo "round $r, mount on RAM, 0 threads:     $ROW"
  done
  python3 - "${rows[@]}" "$EVENTS" "$TABLES" "$TABLE_SIZE" "$THREADS" "$BUFFER_POOL" "$REPEAT" >"$OUT/bench.md" <<'EOF'
import statistics, sys
runs = [[[float(x) for x in r.split()] for r in a.split(";") if r.strip()] for a in sys.argv[1:7]]
events, tables, size, threads, pool, repeat = sys.argv[7:13]
# Medians per column over the rounds; tps ranges beside them.
rows = [[statistics.median(col) for col in zip(*rr)] for rr in runs]
span = [f"{min(r[0] for r in rr):.0f}-{max(r[0] for r in rr):.0f}" for rr in runs]
on, off, atom, plain, mem8, mem0 = rows
mib = lambda pages: pages * 4 / 1024
print("## Double-write on and off, with and without atomic 16 KiB writes\n")
print(f"{tables} tables x {size} rows, {threads} sysbench threads, {events} transactions per run "
      f"(equal), buffer pool {pool}; counters of the run phase only (zeroed after the load). Each "
      f"run on a freshly preconditioned device; medians of {repeat} rounds (each round runs all six "
      "configurations of this page), the range of the throughput beside it. The machine (2 cores) "
      "was shared with other engineers' builds: compare ratios within this page.\n")
print("| run | throughput (tx/s) | range | data written (MiB) | flash writes (4 KiB) | GC runs | copybacks | requests in the device at once (peak) |")
print("|---|---|---|---|---|---|---|---|")
for name, r, sp in [("double-write on", on, span[0]),
                    ("double-write off, device without atomic writes", off, span[1]),
                    ("double-write off, device with `atomic=16KiB`", atom, span[2])]:
    print(f"| {name} | {r[0]:.1f} | {sp} | {mib(r[1]):,.0f} | {r[2]:,.0f} | {r[3]:,.0f} | {r[4]:,.0f} | {r[5]:.0f} |")
x = lambda a, b: f"{a / b:.2f}x" if b else "n/a"
print("\n| ratio | ours | seed 003 |")
print("|---|---|---|")
print(f"| throughput, off (atomic) vs on | {x(atom[0], on[0])} | 1.5-2.2x |")
print(f"| throughput, off (no atomic, unsafe) vs on | {x(off[0], on[0])} | 1.5-2.2x |")
print(f"| throughput, off atomic vs off no atomic | {x(atom[0], off[0])} | 1.1-1.3x |")
print(f"| data written, on vs off (atomic) | {x(on[1], atom[1])} | about 2x (each page twice) |")
print(f"| flash writes, on vs off (atomic) | {x(on[2], atom[2])} | |")
print(f"| GC runs, on vs off (atomic) | {x(on[3], atom[3])} | |")
print("\n### The mount's own cost\n")
print("The same MariaDB (double-write on) on a plain directory in RAM (tmpfs) and on the mount over "
      "a RAM device (`mem`, no emulated latency): what FUSE and pagoda-fs cost. `--threads 0` serves "
      "one request at a time (the mount before the worker threads).\n")
print("| where | throughput (tx/s) | range | vs plain directory | requests in the device at once (peak) |")
print("|---|---|---|---|---|")
print(f"| plain directory (tmpfs) | {plain[0]:.1f} | {span[3]} | 1.00x | - |")
print(f"| `pagoda mount`, mem device, 8 threads | {mem8[0]:.1f} | {span[4]} | {x(mem8[0], plain[0])} | {mem8[5]:.0f} |")
print(f"| `pagoda mount`, mem device, `--threads 0` | {mem0[0]:.1f} | {span[5]} | {x(mem0[0], plain[0])} | {mem0[5]:.0f} |")
print(f"\n8 worker threads vs `--threads 0`: {x(mem8[0], mem0[0])} the throughput.")
EOF
  write_section bench "$OUT/bench.md" "$DEVICE"
  cat "$OUT/bench.md"
  echo "$NAME: table written to $PAGE"
}

# crash_config LABEL DWB DEVICE: CUTS power cuts under load on one image; after a cut that
# leaves the database damaged it starts again from an empty one. One line per cut in
# $OUT/crash-LABEL.rows: cut torn_pages_before recovered check_failures acked lost
# bad_pages_after pages_restored_from_the_double-write_buffer; why recovery failed in
# $OUT/crash-LABEL-CUT-why.txt.
crash_config() {
  local label=$1 dwb=$2 dev=$3
  local work img mnt fresh=1 c
  mdb_workdir; work=$WORK
  img=$work/device.img mnt=$work/mnt
  : >"$OUT/crash-$label.rows"
  for ((c = 1; c <= CUTS; c++)); do
    local log=$OUT/crash-$label-$c
    mdb_mount "$mnt" "$log-load-mount.log" --device "$dev" --backing "$img"
    if [ $fresh = 1 ]; then
      rm -rf "$mnt/data"
      mdb_install "$mnt/data" "$log-install.log"
    fi
    mdb_start "$mnt/data" "$work/mysqld.sock" "$log-load.err" "${MYSQLD_OPTS[@]}" \
      --innodb-doublewrite="$dwb" || die "mariadbd did not start on a healthy database ($log-load.err)"
    sysbench_cmd
    if [ $fresh = 1 ]; then
      mdb_sql "CREATE DATABASE sbtest; CREATE DATABASE ck; CREATE TABLE ck.acked (id BIGINT PRIMARY KEY, pad VARCHAR(255)) ENGINE=InnoDB"
      "${SB[@]}" prepare >"$log-prepare.log"
      fresh=0
    fi
    # Load: sysbench dirties pages; the client prints each id after its INSERT committed
    # (autocommit, flush_log_at_trx_commit=1), unbuffered, into a file outside the mount.
    "${SB[@]}" --events=0 --time=0 run >"$log-sysbench.log" 2>&1 &
    MDB_PIDS+=($!)
    local base=$((c * 100000000))
    seq "$base" $((base + 50000000)) \
      | awk '{printf "INSERT INTO ck.acked VALUES (%d, REPEAT(\"x\", 200)); SELECT %d;\n", $1, $1}' \
      | mariadb -S "$SOCK" -uroot -n -N -B >"$work/acked" 2>/dev/null &
    MDB_PIDS+=($!)
    sleep $((4 + RANDOM % 5))
    echo "power-cut $c" >"$mnt/.pagoda/control"
    mdb_kill_clients
    mdb_stop -9
    mdb_unmount
    # The last line may be cut short by the kill: only whole lines before it count.
    head -n -1 "$work/acked" | grep -E '^[0-9]+$' >"$log-acked.txt" || true
    mdb_mount "$mnt" "$log-recover-mount.log" --device "$dev" --backing "$img"
    local torn after=- recovered=0 checks=- lost=- acked
    acked=$(wc -l <"$log-acked.txt")
    torn=$(count_bad_pages "$mnt/data" "$log-innochecksum-before.log")
    if mdb_start "$mnt/data" "$work/mysqld.sock" "$log-recover.err" "${MYSQLD_OPTS[@]}" --innodb-doublewrite="$dwb"; then
      recovered=1
      checks=$( { mdb_sql "SELECT CONCAT(table_schema, '.', table_name) FROM information_schema.tables WHERE table_schema IN ('sbtest', 'ck')" \
        | while read -r t; do mdb_sql "CHECK TABLE $t" || echo "x x error"; done; } | awk '$3 == "error" || ($3 == "status" && $4 != "OK")' | tee "$log-check.txt" | wc -l)
      mdb_sql "SELECT id FROM ck.acked WHERE id >= $base" | sort >"$log-present.txt" || true
      lost=$(sort "$log-acked.txt" | comm -23 - "$log-present.txt" | wc -l)
      mdb_stop
      after=$(count_bad_pages "$mnt/data" "$log-innochecksum-after.log")
    fi
    local restored
    restored=$(grep -c "Recovered page .* from the doublewrite buffer" "$log-recover.err" || true)
    [ "$recovered" = 1 ] || grep -m1 "\[ERROR\]" "$log-recover.err" | sed 's/^.*\[ERROR\] //' >"$log-why.txt" || true
    echo "$c $torn $recovered $checks $acked $lost $after ${restored:-0}" | tee -a "$OUT/crash-$label.rows"
    mdb_unmount
    # A damaged database is not loaded again: the next cut starts from an empty one.
    if [ "$recovered" != 1 ] || [ "$checks" != 0 ] || [ "$lost" != 0 ] || [ "$after" != 0 ]; then
      rm -f "$img"; fresh=1
    fi
  done
}

# count_bad_pages DATADIR LOG: pages whose checksum fails in ibdata1 and every .ibd file.
# Pages 64-191 of ibdata1 are the double-write buffer: copies of other pages, which never
# check at their own position (innochecksum does not know them).
count_bad_pages() {
  local f k
  : >"$2"
  innochecksum -a 1000000000 -e 63 "$1/ibdata1" >>"$2" 2>&1 || true
  innochecksum -a 1000000000 -s 192 "$1/ibdata1" >>"$2" 2>&1 || true
  for f in "$1"/*/*.ibd; do
    [ -e "$f" ] || continue
    innochecksum -a 1000000000 "$f" >>"$2" 2>&1 || true
  done
  k=$(grep -ci 'fail\|invalid\|mismatch' "$2" || true)
  echo "${k:-0}"
}

crash() {
  echo "$NAME crash: $CUTS power cuts per configuration under sysbench oltp_write_only ($TABLES x $TABLE_SIZE rows, $THREADS threads) plus an INSERT client; buffer pool $BUFFER_POOL"
  # Emulated latency: writes wait in the volatile cache as long as on the drive, so a cut finds
  # some (without it fewer cuts land between a page write and the next flush).
  local dev=${CRASH_DEVICE:-sata-ssd,capacity=1GiB,streams=1,latency=emulate}
  RANDOM=29
  rm -f "$OUT"/crash-*-why.txt
  crash_config dwb-on ON "$dev,atomic=0"
  crash_config dwb-off OFF "$dev,atomic=0"
  crash_config dwb-off-atomic OFF "$dev,atomic=16KiB"
  python3 - "$OUT" "$CUTS" "$dev" >"$OUT/crash.md" <<'EOF'
import sys
out, cuts, dev = sys.argv[1:4]
print("## Power cuts under load\n")
print(f"{cuts} power cuts per configuration (`echo power-cut SEED > MOUNT/.pagoda/control` 4-8 s "
      "into sysbench oltp_write_only plus a client that logs each committed INSERT outside the "
      "mount), each followed by a remount from the `--backing` image, `innochecksum` of ibdata1 "
      "(without pages 64-191, the double-write buffer's copies) and every .ibd (torn pages: the checksum fails), MariaDB's crash recovery, `CHECK TABLE` "
      "of every table, a look for every acknowledged row, a clean shutdown and `innochecksum` "
      f"again. Device `{dev},atomic=...` (not preconditioned). A cut that left the database "
      "damaged starts the next from an empty one. Torn pages need a cut between a page write and "
      "the next flush (each commit's log fsync flushes the device), so only some cuts find one.\n")
print("| configuration | cuts | cuts with torn pages (before recovery) | torn pages | pages restored from the double-write buffer | recovery failed | CHECK TABLE errors | acknowledged rows lost | bad pages after recovery |")
print("|---|---|---|---|---|---|---|---|---|")
for label, name in [("dwb-on", "double-write on, no atomic writes"),
                    ("dwb-off", "double-write off, no atomic writes"),
                    ("dwb-off-atomic", "double-write off, `atomic=16KiB`")]:
    rows = [l.split() for l in open(f"{out}/crash-{label}.rows") if l.strip()]
    n = len(rows)
    torn_cuts = sum(1 for r in rows if int(r[1]) > 0)
    torn = sum(int(r[1]) for r in rows)
    failed = sum(1 for r in rows if r[2] != "1")
    num = lambda i: sum(int(r[i]) for r in rows if r[i] != "-")
    print(f"| {name} | {n} | {torn_cuts} | {torn} | {num(7)} | {failed} | {num(3)} | {num(5)} of {num(4)} | {num(6)} |")
print("\nPer cut (cut, torn pages, recovered, CHECK TABLE errors, acknowledged rows, lost, bad pages "
      "after, pages restored from the double-write buffer):\n")
for label in ["dwb-on", "dwb-off", "dwb-off-atomic"]:
    print(f"- {label}: " + "; ".join(" ".join(l.split()) for l in open(f"{out}/crash-{label}.rows") if l.strip()))
import glob
why = sorted(glob.glob(f"{out}/crash-*-why.txt"))
if why:
    print("\nWhy recovery failed (MariaDB's first error):\n")
    for w in why:
        cut = w.split("/")[-1][len("crash-"):-len("-why.txt")]
        print(f"- {cut}: `{open(w).read().strip()}`")
EOF
  write_section crash "$OUT/crash.md" "$dev"
  cat "$OUT/crash.md"
  echo "$NAME: table written to $PAGE"
}
case $MODE in
  bench) bench ;;
  crash) crash ;;
esac
