#!/usr/bin/env bash
# Builds the `rocksdb` feature (RocksDB as a peer of `pagoda bench`; off by default, so CI's
# workspace build never compiles it). A large C++ build: ~45 minutes on 2 cores, see
# docs/peers.md ("RocksDB: how it is built"). Needs a C++ compiler and libclang (bindgen).
# With ccache installed every compiled C++ file is kept, so an interrupted build resumes.
# Usage: scripts/build-rocksdb.sh [test]   (`test` also runs pagoda-peers' RocksDB tests)
set -euo pipefail
cd "$(dirname "$0")/.."
if ! ldconfig -p 2>/dev/null | grep -q 'libclang'; then
  echo "libclang not found: apt-get install libclang-dev (bindgen needs it)" >&2
  exit 1
fi
if command -v ccache >/dev/null 2>&1; then
  export CXX="${CXX:-ccache c++}" CCACHE_DIR="${CCACHE_DIR:-$PWD/target/ccache}"
fi
cargo build --release --locked -p pagoda --features rocksdb
if [ "${1:-}" = test ]; then
  cargo test --release --locked -p pagoda-peers --features rocksdb
fi
