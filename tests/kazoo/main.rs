//! kazoo's recipes (`src/lease/`, `src/partition/`) against real ZooKeeper servers, on kazoo's
//! node layouts.
//!
//! Every test here is named `kazoo::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery -- kazoo::` runs them.
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod kazoo {
    /// Against real kazoo (a Python peer): leases refused and obtained across the two clients,
    /// a multi-lease shared by both, kazoo and Rust members in one partitioned set.
    mod interop;
    /// `NonBlockingLease` and `MultiNonBlockingLease`: kazoo's record, renewal, expiry, faults.
    mod lease;
    /// `SetPartitioner`: kazoo's layout; 100 items over five members through joins, a leave,
    /// an expiry and a cut.
    mod set_partitioner;
}
