#!/usr/bin/env bash
# Runs the whole test suite against real ZooKeeper servers (started and stopped by the tests)
# and real Apache Curator (interop tests); installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# A missing Curator must fail the interop tests rather than skip them.
export ZKR_REQUIRE_CURATOR=1
cargo test --features testing,tls,sasl "$@"
