#!/usr/bin/env bash
# Runs the demo (`zkr demo`: five workers on one mutex, fifteen on a three-lease semaphore,
# checked) against an embedded ZooKeeper server; installs what is missing first. Arguments go
# to `zkr demo` (e.g. --connect host:port).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo run --quiet --release --bin zkr -- demo "$@"
