#!/usr/bin/env bash
# Runs the whole test suite against real ZooKeeper servers (started and stopped by the tests)
# and real Apache Curator (interop tests); installs what is missing first. Before the tests,
# the checks a dependent would otherwise hit first: the library builds and is clippy-clean with
# no features and with each feature alone, and its documentation has no broken links.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

# Every feature of the library: the keys of its manifest's [features] table, `default` excluded.
features=$(awk '/^\[/ { in_features = ($0 == "[features]") } in_features && /^[A-Za-z0-9_-]+ *=/ { sub(/ *=.*/, ""); if ($0 != "default") print }' Cargo.toml)
for feature in "" $features; do
    flags=(-p zk-recipes --lib --no-default-features)
    if [ -n "$feature" ]; then flags+=(--features "$feature"); fi
    echo "== library with features: ${feature:-none}"
    cargo build "${flags[@]}"
    cargo clippy "${flags[@]}" -- -D warnings
done
echo "== documentation links"
RUSTDOCFLAGS="-D rustdoc::broken_intra_doc_links" cargo doc -p zk-recipes --no-deps --features testing

# A missing Curator must fail the interop tests rather than skip them.
export ZKR_REQUIRE_CURATOR=1
cargo test --features testing,tls,sasl,discovery "$@"
