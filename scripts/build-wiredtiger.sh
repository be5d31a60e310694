#!/usr/bin/env bash
# Builds the `wiredtiger` feature (WiredTiger as a peer of `pagoda bench`; off by default, so
# CI's workspace build needs no C library). Links the system's libwiredtiger through a small C
# shim; installs Debian's libwiredtiger-dev when it is missing and apt-get can run.
# WIREDTIGER_DIR may point at a WiredTiger built elsewhere instead (include/ and lib/).
# Usage: scripts/build-wiredtiger.sh [test]   (`test` also runs pagoda-peers' tests with it)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${WIREDTIGER_DIR:-}" ] && [ ! -e /usr/include/wiredtiger.h ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq libwiredtiger-dev
  else
    echo "wiredtiger.h not found: apt-get install libwiredtiger-dev (as root), or set WIREDTIGER_DIR" >&2
    exit 1
  fi
fi
cargo build --release --locked -p pagoda --features wiredtiger
if [ "${1:-}" = test ]; then
  cargo test --release --locked -p pagoda-peers --features wiredtiger
fi
