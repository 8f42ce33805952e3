//! `CuratorCache` (and its node and path-children views) against real ZooKeeper servers:
//! events, modes, convergence through faults, and requests per event.
//!
//! Every test here is named `caches::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- caches::` runs them.
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod caches {
    /// Curator's and kazoo's cache scenarios; convergence through cuts, expiry, pauses.
    mod curator_cache;
    /// Convergence through connection resets and an isolated follower.
    mod faults;
    /// Server requests per cache event, counted by a proxy.
    mod request_counts;
    /// The watch table from a cache, and a stream that lags (it gets the whole cache).
    mod watch_table;
    /// On a server without persistent watches: one-shot watches stand in (events at depth,
    /// views, convergence after cuts and a session expiry).
    mod without_persistent_watches;
}
