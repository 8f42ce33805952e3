//! The testing module (feature `testing`) against real ZooKeeper servers: servers, ensembles,
//! fault proxies, session expiry, the installation lookup, and cleanup when a test process dies.
//!
//! Every test here is named `testing::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- testing::` runs them and the unit
//! tests of `src/testing/` (the same room).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod testing {
    /// `TestingServer`, `TestingCluster`, `FaultProxy`, `expire_session`, `shared_server`.
    mod testing_module;
}
