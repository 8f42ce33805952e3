//! The testing module (feature `testing`) against real ZooKeeper servers: servers, ensembles,
//! fault proxies, session expiry, the installation lookup, and cleanup when a test process dies.
//!
//! Every test here is named `testing::<module>::<test>`:
//! `cargo test --features testing,tls,sasl,discovery -- testing::` runs them and the unit tests of
//! `src/testing/`; `tests/README.md` maps
//! behaviours to modules.

#[path = "../common/mod.rs"]
mod common;

#[path = "."]
mod testing {
    /// `TestingServer`, `TestingCluster`, `FaultProxy`, `expire_session`, `shared_server`.
    mod testing_module;
}
