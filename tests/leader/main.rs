//! Leader election against real ZooKeeper servers: `LeaderLatch` and `LeaderSelector` on a
//! healthy server and under faults, requests per term, and a latch on a `current_thread` runtime.
//!
//! Every test here is named `leader::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- leader::` runs them and the unit
//! tests of `src/leader/` (the same room).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod leader {
    /// `Leadership::run`: work stopped when leadership is lost.
    mod critical_section;
    /// Both recipes under connection cuts, session loss and ensemble faults (own servers).
    mod faults;
    /// `LeaderLatch`: Curator's `TestLeaderLatch` scenarios without faults.
    mod latch;
    /// A latch waits instead of spinning on a `current_thread` runtime.
    mod latch_current_thread;
    /// `LeaderObserver`: who leads, for a process that is no candidate (faults included).
    mod observer;
    /// Server requests per leadership term, counted by a proxy.
    mod request_counts;
    /// `LeaderSelector`: Curator's and kazoo's scenarios without faults.
    mod selector;
}
