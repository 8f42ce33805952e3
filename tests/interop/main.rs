//! Wire compatibility with real Apache Curator 5.4 (a JVM driven through
//! `tests/common/curator.rs`): Rust and Java clients on the same paths. `scripts/test.sh` sets
//! `ZKR_REQUIRE_CURATOR=1`, so a missing Curator fails these tests instead of skipping them.
//!
//! Every test here is named `interop::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- interop::` runs them (the typed
//! nodes need `serde`).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod interop {
    /// A Rust and a Curator cache agree with the server.
    mod cache;
    /// Gzip data written on either side is read on the other (`compressed()`).
    mod compression;
    /// The harness itself: Curator recipes alone, no zk-recipes code.
    mod curator_harness;
    /// Instances registered on either side read on the other (feature `discovery`).
    mod discovery;
    /// Rust instances as Curator's readers see them (feature `discovery`).
    mod discovery_curator_views;
    /// Rust and Curator members see the same group.
    mod group_member;
    /// One election with Rust and Java candidates (latch and selector).
    mod leader;
    /// Mutexes exclude each other across languages.
    mod mutex;
    /// Read-write locks, revocation and downgrades across languages.
    mod read_write_lock;
    /// One schema JSON accepts and refuses the same operations on both sides (feature `schema`).
    #[cfg(feature = "schema")]
    mod schema;
    /// Leases share one limit; semaphore mutexes exclude each other.
    mod semaphore;
    /// Typed nodes as Jackson writes and reads them (feature `serde`).
    mod typed_nodes;
}
