#!/usr/bin/env bash
# Seed 001 with a real database: MariaDB (InnoDB, 16 KiB pages, double-write buffer ON) runs on
# `pagoda mount`, a FUSE file system whose data lives on an emulated, preconditioned SATA SSD,
# under sysbench oltp_write_only. Two runs on the same device: one stream, then the double-write
# buffer (ibdata1 bytes 1 MiB-3 MiB) on its own FTL stream. As in the seed, both runs do the
# same number of transactions (EVENTS); counters cover the run phase only (zeroed after the
# load). Prints the seed's columns (flash writes, GC runs, copybacks, ops/s) for both and the
# ratios beside the seed's.
#
#   scripts/mariadb-on-pagoda.sh [EVENTS] [OUTDIR]
#   Environment: DEVICE (default sata-ssd,capacity=1GiB,streams=2,precondition=1,latency=emulate),
#   TABLES (8), TABLE_SIZE (50000), THREADS (4), BUFFER_POOL (16M: well below the ~100 MiB of
#   tables, so pages are flushed through the double-write buffer), PAGODA (a built binary;
#   default: cargo build --release).
#
# Needs root and /dev/fuse; installs mariadb-server and sysbench from Debian when missing. Every
# mysqld and mount it starts is stopped on exit, error or Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
EVENTS=${1:-6000}
OUT=${2:-target/mariadb-on-pagoda}
DEVICE=${DEVICE:-sata-ssd,capacity=1GiB,streams=2,precondition=1,latency=emulate}
TABLES=${TABLES:-8}
TABLE_SIZE=${TABLE_SIZE:-50000}
THREADS=${THREADS:-4}
BUFFER_POOL=${BUFFER_POOL:-16M}

NAME=mariadb-on-pagoda
# shellcheck source=scripts/mariadb-lib.sh
. scripts/mariadb-lib.sh
# Checks and installs what is needed, builds pagoda; the cleanup trap below replaces its own.
mdb_setup

MNT="" MYSQLD_PID="" MOUNT_PID="" WORK=""
cleanup() {
  set +e
  if [ -n "$MYSQLD_PID" ] && kill -0 "$MYSQLD_PID" 2>/dev/null; then
    kill "$MYSQLD_PID"; for _ in $(seq 60); do kill -0 "$MYSQLD_PID" 2>/dev/null || break; sleep 1; done
    kill -9 "$MYSQLD_PID" 2>/dev/null
  fi
  MYSQLD_PID=""
  if [ -n "$MOUNT_PID" ] && kill -0 "$MOUNT_PID" 2>/dev/null; then
    kill "$MOUNT_PID"; for _ in $(seq 30); do kill -0 "$MOUNT_PID" 2>/dev/null || break; sleep 1; done
    kill -9 "$MOUNT_PID" 2>/dev/null
  fi
  MOUNT_PID=""
  [ -n "$MNT" ] && mountpoint -q "$MNT" && umount -l "$MNT"
  [ -n "$WORK" ] && rm -rf "$WORK"
  WORK=""
}
trap cleanup EXIT
trap 'echo "interrupted" >&2; exit 130' INT TERM

# run LABEL [--stream RULE]: prints "flash_programs gc_runs copybacks tps" of the run phase.
run() {
  local label=$1; shift
  WORK=$(mktemp -d /tmp/pagoda-mariadb.XXXXXX)
  MNT=$WORK/mnt; mkdir -p "$MNT"
  local sock=$WORK/mysqld.sock
  "$PAGODA" mount "$MNT" --device "$DEVICE" "$@" --json "$OUT/$label-final.json" \
    >"$OUT/$label-mount.log" 2>&1 &
  MOUNT_PID=$!
  for _ in $(seq 120); do [ -e "$MNT/.pagoda/stats" ] && break; kill -0 "$MOUNT_PID" || break; sleep 0.5; done
  [ -e "$MNT/.pagoda/stats" ] || { cat "$OUT/$label-mount.log" >&2; die "pagoda mount did not come up"; }
  mariadb-install-db --no-defaults --datadir="$MNT/data" --user=root --auth-root-authentication-method=normal \
    --skip-test-db --innodb-page-size=16k >"$OUT/$label-install.log" 2>&1 \
    || { tail "$OUT/$label-install.log" >&2; die "mariadb-install-db failed (log above)"; }
  mariadbd --no-defaults --user=root --datadir="$MNT/data" --socket="$sock" --pid-file="$WORK/mysqld.pid" \
    --skip-networking --log-error="$OUT/$label-mysqld.err" \
    --innodb-page-size=16k --innodb-doublewrite=ON --innodb-flush-method=fsync \
    --innodb-flush-log-at-trx-commit=1 --innodb-buffer-pool-size="$BUFFER_POOL" --innodb-log-file-size=64M \
    --innodb-io-capacity=2000 --max-connections=100 &
  MYSQLD_PID=$!
  for _ in $(seq 120); do [ -S "$sock" ] && break; kill -0 "$MYSQLD_PID" || break; sleep 0.5; done
  [ -S "$sock" ] || { tail "$OUT/$label-mysqld.err" >&2; die "mariadbd did not start (log above)"; }
  mariadb -S "$sock" -uroot -e "CREATE DATABASE sbtest"
  local sb=(sysbench oltp_write_only --db-driver=mysql --mysql-socket="$sock" --mysql-user=root
            --mysql-db=sbtest --tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$THREADS")
  "${sb[@]}" prepare >"$OUT/$label-prepare.log"
  # Measure the run phase only: counters zeroed after the load.
  echo reset-stats >"$MNT/.pagoda/control"
  "${sb[@]}" --events="$EVENTS" --time=0 --report-interval=30 run >"$OUT/$label-sysbench.log"
  cp "$MNT/.pagoda/stats.json" "$OUT/$label-run.json"
  cleanup
  python3 - "$OUT/$label-run.json" "$OUT/$label-sysbench.log" <<'EOF'
import json, re, sys
s = json.load(open(sys.argv[1]))["device_stats"]
tps = re.search(r"transactions:\s+\d+\s+\(([\d.]+) per sec", open(sys.argv[2]).read()).group(1)
print(s["flash_programs"], s["gc_runs"], s["copybacks"], tps, s["host_write_pages"],
      s["streams"][1]["host_write_pages"], s["streams"][1]["copybacks"])
EOF
}

echo "device: $DEVICE; sysbench oltp_write_only, $TABLES tables x $TABLE_SIZE rows, $THREADS threads, $EVENTS transactions, buffer pool $BUFFER_POOL"
ONE=$(run one-stream)
echo "one stream:   $ONE"
DWB=$(run dwb-stream --stream dwb=ibdata1:1MiB-3MiB)
echo "dwb separate: $DWB"
python3 - "$ONE" "$DWB" <<'EOF'
import sys
a = [float(x) for x in sys.argv[1].split()]
b = [float(x) for x in sys.argv[2].split()]
pct = lambda x, y: (y - x) / x * 100 if x else float("nan")
print()
print("| FTL | host writes | flash writes | GC | copyback | ops (tx/s) | DWB stream writes | DWB copybacks |")
print("|---|---|---|---|---|---|---|---|")
print(f"| one stream | {a[4]:,.0f} | {a[0]:,.0f} | {a[1]:,.0f} | {a[2]:,.0f} | {a[3]:.1f} | - | - |")
print(f"| DWB separated | {b[4]:,.0f} | {b[0]:,.0f} | {b[1]:,.0f} | {b[2]:,.0f} | {b[3]:.1f} | {b[5]:,.0f} | {b[6]:,.0f} |")
print()
print("| ratio (separated vs one) | ours | seed 001 |")
print("|---|---|---|")
print(f"| copyback | {pct(a[2], b[2]):+.1f} % | -14.6 % |")
print(f"| GC | {pct(a[1], b[1]):+.1f} % | -5.2 % |")
print(f"| ops/s | {pct(a[3], b[3]):+.1f} % | +6.4 % |")
EOF
