//! Queues and barriers against real ZooKeeper servers.
//!
//! Every test here is named `queues::<module>::<test>`, so
//! `cargo test --features testing,tls,sasl,discovery,serde,schema -- queues::` runs them.
//! `tests/README.md` maps behaviours to binaries and modules.

#[path = "../common/mod.rs"]
mod common;

// One module per file beside this one, inside a module named after the binary: its name
// starts every test's.
#[path = "."]
mod queues {
    /// `DistributedBarrier` and `DistributedDoubleBarrier`.
    mod barriers;
    /// `DistributedQueue`'s item limit, background puts, put events and flushes; `QueueSharder`.
    mod queue_extras;
    /// `DistributedIdQueue`, `DistributedPriorityQueue`, `DistributedDelayQueue`.
    mod queue_variants;
    /// Server requests per queue item, counted by a proxy.
    mod request_counts;
    /// `SimpleDistributedQueue`: FIFO order, waiting takes, Curator producers.
    mod simple_queue;
}
