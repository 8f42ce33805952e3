#!/usr/bin/env bash
# Runs the whole test suite against real ZooKeeper servers (started and stopped by the tests)
# and real Apache Curator (interop tests); installs what is missing first. Before the tests,
# the checks a dependent would otherwise hit first: the library compiles and is clippy-clean
# with no features and with each feature alone, and its documentation has no broken links.
#
# Arguments go to `cargo test` (for example `--no-fail-fast`, or `-- locks::` for one area:
# see tests/README.md). The test binaries run one after another, each running RUST_TEST_THREADS
# tests at a time (default 8: the tests mostly wait on servers, timers and each other, using
# about one core of two between them); the chaos run, minutes of mostly waiting on its own
# ensemble, runs beside them (with no arguments, or `--no-fail-fast` alone).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# No incremental compilation: a clean build (as in CI) gains nothing from it, and its caches
# would more than double what the build leaves on disk.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

# Every feature of the library: the keys of its manifest's [features] table, `default` excluded.
features=$(awk '/^\[/ { in_features = ($0 == "[features]") } in_features && /^[A-Za-z0-9_-]+ *=/ { sub(/ *=.*/, ""); if ($0 != "default") print }' Cargo.toml)
for feature in "" $features; do
    flags=(-p zk-recipes --lib --no-default-features)
    if [ -n "$feature" ]; then flags+=(--features "$feature"); fi
    echo "== library with features: ${feature:-none}"
    # Clippy runs the compiler on the library (every check `cargo build` makes before code
    # generation) and then its lints; the test build below generates the code, all features on.
    cargo clippy "${flags[@]}" -- -D warnings
done
echo "== documentation links"
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" cargo doc -p zk-recipes --no-deps --features testing,discovery,serde,schema

# A missing Curator or kazoo must fail the interop tests rather than skip them.
export ZKR_REQUIRE_CURATOR=1
export ZKR_REQUIRE_KAZOO=1
export RUST_TEST_THREADS="${RUST_TEST_THREADS:-8}"
# `sasl-gssapi` brings in the Kerberos test (framework::kerberos), which starts an MIT KDC
# (setup.sh installs it and the GSSAPI library the feature builds against).
test_args=(--features testing,tls,sasl,discovery,serde,schema,sasl-gssapi "$@")

echo "== tests"
cargo test "${test_args[@]}" --no-run
for arg in "$@"; do
    if [ "$arg" != "--no-fail-fast" ]; then
        # The caller chose targets, tests or options: one run, as asked.
        exec cargo test "${test_args[@]}"
    fi
done

# The chaos run (tests/chaos/) beside everything else; its output follows the others'.
chaos_log=$(mktemp)
trap 'rm -f "$chaos_log"' EXIT
# Without backtraces: its checks fail by assertion, and the message names the seed and the
# verdicts; a backtrace would push them out of the tail of a long log.
RUST_BACKTRACE=0 cargo test "${test_args[@]}" --test chaos >"$chaos_log" 2>&1 &
chaos=$!
status=0
cargo test "${test_args[@]}" -- --skip chaos:: || status=$?
chaos_status=0
wait "$chaos" || chaos_status=$?
echo "== chaos (tests/chaos/, run beside the tests above)"
cat "$chaos_log"
if [ "$chaos_status" -ne 0 ]; then
    echo "the chaos run failed (exit $chaos_status)" >&2
    status=1
fi
exit "$status"
