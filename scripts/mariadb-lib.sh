# shellcheck shell=bash
# Shared by scripts/mariadb-*.sh (sourced, not run): what they need, a pagoda mount, a
# MariaDB server on it, and the cleanup of both on exit, error or Ctrl-C.
#
# The caller sets NAME (its name in messages) and OUT (a directory for logs) and calls
# mdb_setup; then mdb_mount / mdb_start / mdb_stop / mdb_unmount. mdb_cleanup (the EXIT trap)
# stops every mariadbd, client and mount the script started and removes its work directories.

MDB_PIDS=()      # clients (sysbench, load loops) to kill
MYSQLD_PID="" MOUNT_PID="" MNT="" SOCK="" DATADIR=""
MDB_WORKDIRS=()
MDB_TMPFS=()     # tmpfs mounts (the plain-directory runs)

die() { echo "$NAME: cannot run: $*" >&2; exit 2; }

# Checks root, /dev/fuse, installs mariadb-server and sysbench from Debian when missing, and
# builds pagoda (PAGODA: a built binary instead). One line says what is missing.
mdb_setup() {
  [ "$(id -u)" = 0 ] || die "needs root (FUSE mount without fusermount, apt-get)"
  [ -c /dev/fuse ] || die "/dev/fuse is missing (modprobe fuse; in a container pass --device /dev/fuse)"
  if ! command -v mariadbd >/dev/null || ! command -v sysbench >/dev/null; then
    echo "installing mariadb-server and sysbench from Debian..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq mariadb-server sysbench; } \
      >/dev/null || die "apt-get install mariadb-server sysbench failed (no network? install them by hand)"
  fi
  local b
  for b in mariadbd mariadb-install-db mariadb mariadb-admin sysbench innochecksum python3; do
    command -v "$b" >/dev/null || die "$b not found (apt-get install mariadb-server sysbench python3)"
  done
  if [ -z "${PAGODA:-}" ]; then
    cargo build --release -q -p pagoda || die "cargo build --release -p pagoda failed"
    PAGODA=${CARGO_TARGET_DIR:-target}/release/pagoda
  fi
  mkdir -p "$OUT"
  OUT=$(cd "$OUT" && pwd)
  trap mdb_cleanup EXIT
  trap 'echo "$NAME: interrupted" >&2; exit 130' INT TERM
}

# WORK: a new work directory under /tmp, removed at exit (set here, not printed: from a $(...)
# subshell the cleanup would never learn of it).
mdb_workdir() {
  WORK=$(mktemp -d /tmp/pagoda-mariadb.XXXXXX)
  MDB_WORKDIRS+=("$WORK")
}

# Waits up to $2 half-seconds for pid $1 to exit; then kill -9.
mdb_reap() {
  local pid=$1 n=${2:-60} i
  for ((i = 0; i < n; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.5; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  return 0
}

mdb_kill_clients() {
  local p
  for p in "${MDB_PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
  MDB_PIDS=()
}

# Stops mariadbd: a clean shutdown, or with `-9` a kill (after a power cut it cannot write).
mdb_stop() {
  [ -n "$MYSQLD_PID" ] || return 0
  if [ "${1:-}" = -9 ]; then kill -9 "$MYSQLD_PID" 2>/dev/null || true; else kill "$MYSQLD_PID" 2>/dev/null || true; fi
  mdb_reap "$MYSQLD_PID" 240
  MYSQLD_PID=""
}

# Stops the mount process (its report goes to the log) and makes sure nothing stays mounted.
mdb_unmount() {
  if [ -n "$MOUNT_PID" ]; then
    kill "$MOUNT_PID" 2>/dev/null || true
    mdb_reap "$MOUNT_PID" 60
    MOUNT_PID=""
  fi
  if [ -n "$MNT" ] && mountpoint -q "$MNT"; then umount "$MNT" 2>/dev/null || umount -l "$MNT"; fi
  return 0
}

mdb_cleanup() {
  set +e
  mdb_kill_clients
  mdb_stop
  mdb_unmount
  local d
  for d in "${MDB_TMPFS[@]}"; do mountpoint -q "$d" && { umount "$d" 2>/dev/null || umount -l "$d"; }; done
  MDB_TMPFS=()
  for d in "${MDB_WORKDIRS[@]}"; do rm -rf "$d"; done
  MDB_WORKDIRS=()
}

# mdb_tmpfs DIR: a RAM file system at DIR (a plain directory to compare the mount with).
mdb_tmpfs() {
  mkdir -p "$1"
  mount -t tmpfs -o size=3G tmpfs "$1" || die "mount -t tmpfs failed"
  MDB_TMPFS+=("$1")
}

# mdb_mount DIR LOG ARGS...: `pagoda mount DIR ARGS...` in the background, until it serves.
mdb_mount() {
  MNT=$1; local log=$2; shift 2
  mkdir -p "$MNT"
  "$PAGODA" mount "$MNT" "$@" >"$log" 2>&1 &
  MOUNT_PID=$!
  local i
  for i in $(seq 240); do [ -e "$MNT/.pagoda/stats" ] && return 0; kill -0 "$MOUNT_PID" 2>/dev/null || break; sleep 0.5; done
  tail -5 "$log" >&2
  die "pagoda mount did not come up (log above: $log)"
}

# mdb_install DATADIR LOG: an empty MariaDB data directory with 16 KiB pages.
mdb_install() {
  mariadb-install-db --no-defaults --datadir="$1" --user=root --auth-root-authentication-method=normal \
    --skip-test-db --innodb-page-size=16k >"$2" 2>&1 \
    || { tail "$2" >&2; die "mariadb-install-db failed (log above: $2)"; }
}

# mdb_start DATADIR SOCK ERRLOG MYSQLD-OPTIONS...: starts mariadbd; returns 1 when it does not
# come up (crash recovery refused), the reason in ERRLOG.
mdb_start() {
  DATADIR=$1 SOCK=$2; local err=$3; shift 3
  mariadbd --no-defaults --user=root --datadir="$DATADIR" --socket="$SOCK" \
    --pid-file="${SOCK%.sock}.pid" --skip-networking --log-error="$err" \
    --innodb-page-size=16k --innodb-flush-log-at-trx-commit=1 --innodb-log-file-size=64M \
    --max-connections=100 "$@" &
  MYSQLD_PID=$!
  local i
  for i in $(seq 600); do
    mariadb -S "$SOCK" -uroot -e "SELECT 1" >/dev/null 2>&1 && return 0
    kill -0 "$MYSQLD_PID" 2>/dev/null || break
    sleep 0.5
  done
  mdb_stop -9
  return 1
}

# mdb_sql SQL...: runs statements on the server at $SOCK, batch output.
mdb_sql() { mariadb -S "$SOCK" -uroot -N -B -e "$*"; }
