//! Queues and barriers against real ZooKeeper servers.
//!
//! Every test here is named `queues::<module>::<test>`:
//! `cargo test --features testing,tls,sasl,discovery -- queues::` runs them; `tests/README.md` maps
//! behaviours to modules.

#[path = "../common/mod.rs"]
mod common;

#[path = "."]
mod queues {
    /// `DistributedBarrier` and `DistributedDoubleBarrier`.
    mod barriers;
    /// `DistributedIdQueue`, `DistributedPriorityQueue`, `DistributedDelayQueue`.
    mod queue_variants;
    /// Server requests per queue item, counted by a proxy.
    mod request_counts;
    /// `SimpleDistributedQueue`: FIFO order, waiting takes, Curator producers.
    mod simple_queue;
}
