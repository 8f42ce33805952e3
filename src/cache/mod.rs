//! Caches: [`CuratorCache`] and its node and path-children views, on one mirror of a
//! ZooKeeper subtree (see the `mirror` module) kept current by one persistent watch.
//!
//! # Requests
//! Events come from the watch; a node's stat and data do not (a ZooKeeper watch event names
//! the node and what happened to it, nothing more), so the cache reads what an event leaves
//! unknown, on the framework's session:
//!
//! | what happens | requests (the default) | requests ([`stats_only`]) |
//! | --- | --- | --- |
//! | a node is created or its data changes | one `getData` of it (the reads of events that arrive together: one `multiRead` of up to 64) | one `exists` of it |
//! | a node is deleted | none | none |
//! | events for a node whose read is still out | a second read at once (at most two out per node); none for events while two are out | the same |
//! | the load, and each resync after a reconnect or a new session | one `addWatch`, a `getData` of every node (the nodes found by one listing go together, in `multiRead`s of up to 16), one `getChildren` per node that has children | one `addWatch`, one `getChildren` per node (it carries the stat) |
//!
//! [`CacheMode::Children`] lists only the root (one `getChildren`) and reads each child;
//! [`CacheMode::SingleNode`] reads the root alone. A load's and a resync's reads are
//! pipelined on the one connection, [`max_reads_in_flight`] at a time (default 64; a
//! `multiRead` carries at most a quarter of them, so that several requests stay in flight, and
//! a server spends less per node on one request of many reads than on many requests); the
//! reads that follow events go out as the events arrive, those of events that arrive together
//! in one `multiRead` (so a burst of changes costs a few requests, not one per change, which
//! is what keeps the cache's reads from queueing among a busy writer's writes at the server). A node written many times in a
//! row has at most two reads in flight (the second goes out at the change that comes while
//! the first is out, so each change is shown about one round trip after it) and never costs
//! more reads than events; the view it settles on is the last one. A create cannot go without a read even in stats-only mode:
//! its event carries no stat (no version, owner, times or data length). `tests/caches/request_counts.rs`
//! asserts these counts with a counting proxy.
//!
//! [`stats_only`]: CuratorCacheBuilder::stats_only
//! [`max_reads_in_flight`]: CuratorCacheBuilder::max_reads_in_flight
//!
//! # Memory
//! A cached node costs the client about 600 bytes with 100 bytes of data: its entry in the
//! mirror, its path, stat and shared data. Measured as the growth of the client's resident
//! memory (RSS) while a cache of a two-level tree (100 parents, 100-byte data on every node)
//! is held, in a process doing nothing else (`tests/caches/curator_cache.rs`, `memory_per_cached_node` and
//! `memory_per_cached_node_100k`, run by name with `--ignored --nocapture`), December 2026,
//! Linux x86-64, glibc malloc, a debug build:
//!
//! | nodes cached | RSS before | RSS after | bytes per node |
//! | --- | --- | --- | --- |
//! | 10,001 | 11.6 MiB | 17.6 MiB | 634 |
//! | 100,001 | 14.6 MiB | 69.5 MiB | 576 |
//!
//! Again after loads became multi-reads (same tests, same machine): 10,001 nodes, 15.5 to
//! 21.5 MiB, 638 bytes per node; 100,001 nodes, 21.6 to 76.5 MiB, 575 bytes per node. The
//! figures are single runs on a shared machine; the allocator's own overhead is included.

mod builder;
mod handle;
mod hub;
mod listener;
mod mode;
mod node;
mod subscription;
mod views;

pub use self::builder::CuratorCacheBuilder;
pub use self::handle::CuratorCache;
pub use self::listener::{CacheEventStream, CuratorCacheListener};
pub use self::mode::CacheMode;
pub use self::node::{CacheEvent, ChildData};
pub use self::views::{NodeStream, PathChildrenEvent, PathChildrenStream};
