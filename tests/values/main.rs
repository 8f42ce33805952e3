//! Shared values and atomics against real ZooKeeper servers: `SharedCount`, `SharedValue`,
//! `DistributedAtomicLong`/`Integer`/`Value`, and compile-time checks that they (and the
//! barriers and queues) cross threads.
//!
//! Every test here is named `values::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- values::` runs them (the typed
//! nodes need `serde`).
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod values {
    /// An atomic that knows its node writes without reading (requests counted).
    mod atomic_knowledge;
    /// The distributed atomics: layout, exact sums, faults, a Curator peer.
    mod atomics;
    /// `CachedAtomicLong`/`Integer`: blocks, values never repeated (faults, a Curator peer).
    mod cached_atomics;
    /// Values, atomics, barriers and queues are `Send` and `Sync` (compile time).
    mod send_sync;
    /// How a shared value's copy follows its node (requests counted).
    mod shared_value_follow;
    /// `SharedCount` and `SharedValue`: layout, compare-and-set, listeners.
    mod shared_values;
    /// Typed nodes, their cache and a typed shared value; compression (feature `serde`).
    mod typed_nodes;
    /// The atomics on a server without persistent watches: exact sums.
    mod without_persistent_watches;
}
