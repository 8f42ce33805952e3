#!/usr/bin/env bash
# Runs the demo against an embedded ZooKeeper server; installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
cargo run --quiet --features testing --example demo "$@"
